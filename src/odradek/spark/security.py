"""Spark's Kafka security options, in the names librdkafka reads.

A Spark job secures its Kafka connector with Java client property names under
``kafka.`` (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``, ...). The source
and sink talk through confluent-kafka (librdkafka), which names the same
settings differently and refuses the Java ones, so :func:`to_librdkafka`
rewrites them; librdkafka's own names pass through unchanged.

What is rewritten (the rest passes through):

- ``sasl.jaas.config`` with PlainLoginModule or ScramLoginModule →
  ``sasl.username`` and ``sasl.password``; with OAuthBearerLoginModule and
  ``unsecuredLoginStringClaim_sub`` → ``enable.sasl.oauthbearer.unsecure.jwt``
  and ``sasl.oauthbearer.config`` (``principal=...``);
- ``ssl.truststore.location``: type PEM → ``ssl.ca.location``; type PKCS12 →
  ``ssl.ca.location`` naming its certificates written as PEM to a private file;
- ``ssl.truststore.certificates`` → ``ssl.ca.pem``;
- ``ssl.keystore.location``: PKCS12 passes through (with ``.password``); type
  PEM (key and chain in one file) → ``ssl.certificate.location`` and
  ``ssl.key.location``;
- ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` → ``ssl.key.pem`` /
  ``ssl.certificate.pem``;
- ``ssl.endpoint.identification.algorithm`` = ``""`` (Java's "off") → ``none``.

JKS stores are refused with one line: convert them to PKCS12 (``keytool
-importkeystore -deststoretype PKCS12``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping

from odradek.common.jaas import JaasError, single_module

_DROPPED = ("sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type",
            "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keystore.type",
            "ssl.keystore.key", "ssl.keystore.certificate.chain")


class SecurityOptionError(ValueError):
    """A security option that cannot be used (one line, naming the option)."""


def to_librdkafka(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` (client names, ``kafka.`` removed) with Java security names
    rewritten for librdkafka. Pure but for a PKCS12 truststore, whose
    certificates are written once to a private PEM file (named by the store's
    digest, so every executor and every call agrees on it)."""
    out = {k: v for k, v in config.items() if k not in _DROPPED}
    jaas = config.get("sasl.jaas.config")
    if jaas:
        out.update(_from_jaas(jaas, config.get("sasl.mechanism", "GSSAPI").upper()))
    trust_type = config.get("ssl.truststore.type", "JKS" if "ssl.truststore.location"
                            in config else "PEM").upper()
    if "ssl.truststore.location" in config:
        location = config["ssl.truststore.location"]
        if trust_type == "PEM":
            out["ssl.ca.location"] = location
        elif trust_type == "PKCS12":
            out["ssl.ca.location"] = _pkcs12_trust_as_pem(
                location, config.get("ssl.truststore.password", ""))
        else:
            raise SecurityOptionError(
                f"option 'kafka.ssl.truststore.type' {trust_type} is not readable here: "
                "use PEM or PKCS12 (keytool -importkeystore -deststoretype PKCS12)")
    if "ssl.truststore.certificates" in config:
        out["ssl.ca.pem"] = config["ssl.truststore.certificates"]
    key_type = config.get("ssl.keystore.type", "JKS" if "ssl.keystore.location" in config
                          else "PEM").upper()
    if "ssl.keystore.location" in config:
        if key_type == "PEM":
            del out["ssl.keystore.location"]
            out.pop("ssl.keystore.password", None)
            out["ssl.certificate.location"] = out["ssl.key.location"] = \
                config["ssl.keystore.location"]
        elif key_type != "PKCS12":
            raise SecurityOptionError(
                f"option 'kafka.ssl.keystore.type' {key_type} is not readable here: "
                "use PEM or PKCS12 (keytool -importkeystore -deststoretype PKCS12)")
    if "ssl.keystore.key" in config:
        out["ssl.key.pem"] = config["ssl.keystore.key"]
    if "ssl.keystore.certificate.chain" in config:
        out["ssl.certificate.pem"] = config["ssl.keystore.certificate.chain"]
    if config.get("ssl.endpoint.identification.algorithm", None) == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


def _from_jaas(text: str, mechanism: str) -> dict[str, str]:
    try:
        module = single_module(text)
    except JaasError as exc:
        raise SecurityOptionError(f"option 'kafka.sasl.jaas.config': {exc}") from None
    options = module.options
    if module.short_name in ("PlainLoginModule", "ScramLoginModule"):
        if "username" not in options or "password" not in options:
            raise SecurityOptionError(
                f"option 'kafka.sasl.jaas.config': {module.short_name} needs username and "
                "password")
        return {"sasl.username": options["username"], "sasl.password": options["password"]}
    if module.short_name == "OAuthBearerLoginModule":
        principal = options.get("unsecuredLoginStringClaim_sub")
        if principal is None:
            raise SecurityOptionError(
                "option 'kafka.sasl.jaas.config': OAuthBearerLoginModule without "
                "unsecuredLoginStringClaim_sub needs a token endpoint, which librdkafka "
                "sets with sasl.oauthbearer.method=oidc and its sasl.oauthbearer.* options")
        config = f"principal={principal}"
        if "unsecuredLoginLifetimeSeconds" in options:
            config += f" lifeSeconds={options['unsecuredLoginLifetimeSeconds']}"
        return {"enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": config}
    raise SecurityOptionError(
        f"option 'kafka.sasl.jaas.config': login module {module.short_name} is not "
        f"supported for {mechanism} (use PlainLoginModule, ScramLoginModule or "
        "OAuthBearerLoginModule)")


def _pkcs12_trust_as_pem(location: str, password: str) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        with open(location, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SecurityOptionError(
            f"option 'kafka.ssl.truststore.location': cannot read {location}: "
            f"{exc.strerror}") from None
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise SecurityOptionError(
            "option 'kafka.ssl.truststore.location': not a PKCS12 store, or the "
            "password (kafka.ssl.truststore.password) is wrong") from None
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        raise SecurityOptionError(
            f"option 'kafka.ssl.truststore.location': {location} holds no certificate")
    pem = b"".join(c.public_bytes(Encoding.PEM) for c in certs)
    path = os.path.join(tempfile.gettempdir(),
                        f"odradek-truststore-{hashlib.sha256(pem).hexdigest()[:16]}.pem")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=tempfile.gettempdir(), prefix=".odradek-trust-")
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        os.replace(tmp, path)
    return path

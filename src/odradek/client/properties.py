"""Client security settings from Kafka's client property names.

What ``--command-config FILE`` holds (Kafka's Java client names), or
librdkafka's (confluent-kafka, kcat), both accepted in one mapping:

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL;
* ``ssl.truststore.location`` / ``.type`` / ``.password``: the CA certificates to
  trust (PEM or PKCS12); ``ssl.truststore.certificates``: the same, inline PEM;
* ``ssl.keystore.location`` / ``.type`` / ``.password`` and ``ssl.key.password``:
  this client's key and certificate (PEM or PKCS12); ``ssl.keystore.key`` with
  ``ssl.keystore.certificate.chain``: the same, inline PEM (PKCS#8 key);
* ``ssl.endpoint.identification.algorithm``: ``https`` (default) checks the
  broker's host name, empty does not;
* ``ssl.enabled.protocols``, ``ssl.protocol``, ``ssl.cipher.suites``;
* ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and
  ``sasl.jaas.config`` (``...PlainLoginModule required username="u"
  password="p";``, or ScramLoginModule) for the user name and password;
* librdkafka's ``ssl.ca.location`` (a CA file or directory),
  ``ssl.certificate.location`` and ``ssl.key.location`` (PEM),
  ``sasl.username``, ``sasl.password``, ``sasl.mechanisms``.

Any other ``ssl.*``, ``sasl.*`` or ``security.*`` key, or a value that cannot be
used, is a ``ValueError`` of one line naming the key; other keys (client
tuning such as ``request.timeout.ms``) are not this module's and are ignored.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

from odradek.client.keystores import apply_protocols, load_keystore, load_truststore
from odradek.client.security import PROTOCOLS, ClientSecurity
from odradek.common.jaas import single_module

KNOWN = frozenset({
    "security.protocol",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.cipher.suites",
    "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
})
MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256",
                                                                "SCRAM-SHA-512"),
}
def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule class> <flag> key="value" ...;`` → (class, options), read by
    :mod:`odradek.common.jaas` (ValueError, one line, quoting no value)."""
    module = single_module(text)
    return module.module, module.options


def _client_context(props: Mapping[str, str]) -> tuple[ssl.SSLContext, bool]:
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise ValueError(f"ssl.endpoint.identification.algorithm: expected https or empty, "
                         f"got {algorithm!r}")
    check = algorithm == "https"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = check
    apply_protocols(ctx, props)
    ca = props.get("ssl.ca.location", "").strip()
    if ca and (props.get("ssl.truststore.location") or props.get("ssl.truststore.certificates")):
        raise ValueError("ssl.ca.location: set either it or ssl.truststore.*, not both")
    if ca:
        try:
            if os.path.isdir(ca):
                ctx.load_verify_locations(capath=ca)
            else:
                ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"ssl.ca.location: cannot use {ca}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    elif not load_truststore(ctx, props):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    cert = props.get("ssl.certificate.location", "").strip()
    key = props.get("ssl.key.location", "").strip()
    if cert or key:
        if not (cert and key):
            raise ValueError("ssl.certificate.location and ssl.key.location: set both or neither")
        if props.get("ssl.keystore.location") or props.get("ssl.keystore.key"):
            raise ValueError("ssl.certificate.location: set either it or ssl.keystore.*, "
                             "not both")
        try:
            ctx.load_cert_chain(cert, key, props.get("ssl.key.password") or None)
        except OSError as exc:
            raise ValueError(f"ssl.certificate.location / ssl.key.location: cannot read "
                             f"{cert} or {key}: {exc.strerror or exc}") from None
        except ssl.SSLError as exc:
            raise ValueError(f"ssl.key.location: {key} does not match {cert} or its password "
                             f"is wrong ({exc.reason or exc})") from None
    else:
        load_keystore(ctx, props)
    return ctx, check


def security_from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """The :class:`ClientSecurity` that ``props`` describe (ValueError, one line)."""
    for key in props:
        if key.startswith(("ssl.", "sasl.", "security.")) and key not in KNOWN:
            raise ValueError(f"{key}: not a client security setting this client knows")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper() or "PLAINTEXT"
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol: expected one of {', '.join(PROTOCOLS)}, "
                         f"got {protocol!r}")
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms")
                 or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"sasl.mechanism: expected one of {', '.join(MECHANISMS)}, "
                         f"got {mechanism!r}")
    username = props.get("sasl.username", "")
    password = props.get("sasl.password", "")
    jaas = props.get("sasl.jaas.config", "").strip()
    if jaas:
        module, options = parse_jaas(jaas)
        allowed = _LOGIN_MODULES.get(module)
        if allowed is None:
            raise ValueError(f"sasl.jaas.config: login module {module} is not supported "
                             f"(PlainLoginModule, ScramLoginModule)")
        if mechanism not in allowed:
            raise ValueError(f"sasl.jaas.config: {module.rsplit('.', 1)[-1]} does not go with "
                             f"sasl.mechanism={mechanism}")
        username = options.get("username", username)
        password = options.get("password", password)
    context, check = None, True
    if protocol in ("SSL", "SASL_SSL"):
        context, check = _client_context(props)
    return ClientSecurity(protocol=protocol, ssl_context=context, check_hostname=check,
                          sasl_mechanism=mechanism, sasl_username=username,
                          sasl_password=password)

"""Kafka's key and trust stores loaded into a stdlib :class:`ssl.SSLContext`.

Both ends use it: a broker's listener (``broker/net/tls.py``) and this
package's client (:mod:`odradek.client.security`). Settings are Kafka's
``ssl.*`` names without a listener prefix, in a mapping; ``origin(key)``
gives the name a message should show (``listener.name.ssl.ssl.keystore.location``
when the value came from the listener's override). Every failure is a
:class:`StoreError` (a ``ValueError``) of one line naming the key.

Store types: ``PEM`` (a file holding the PKCS#8 key and the certificate chain,
or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``),
``PKCS12`` (read with ``cryptography``). ``JKS`` cannot be read from Python
and is refused with how to convert it. When ``ssl.keystore.type`` (or
``ssl.truststore.type``) is not given, the file's content decides: a PEM
header means PEM, anything else is read as PKCS12 (Kafka's default JKS
would be refused anyway).

The stdlib loads keys only from files: inline keys, and keys out of a PKCS12
store, are written to a private (0600) temporary file, encrypted with a random
password, and removed as soon as they are loaded.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

Origin = Callable[[str], str]

_PEM = b"-----BEGIN "
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CONTEXT_PROTOCOLS = {"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3"}


class StoreError(ValueError):
    """A key or trust store that cannot be used; the message is one line."""


def _same(key: str) -> str:
    return key


def _jks_refusal(key: str, location: str) -> StoreError:
    return StoreError(
        f"{key}: JKS stores cannot be read by Odradek; convert {location or 'it'} with "
        f"`keytool -importkeystore -srckeystore X.jks -destkeystore X.p12 "
        f"-deststoretype PKCS12` and set the type to PKCS12")


def _store_type(props: Mapping[str, str], type_key: str, location_key: str,
                origin: Origin) -> tuple[str, bytes]:
    """(type, file bytes) of a file store; the type sniffed when not given."""
    location = props.get(location_key, "").strip()
    given = props.get(type_key, "").strip().upper()
    if given and given not in ("PEM", "PKCS12", "JKS"):
        raise StoreError(f"{origin(type_key)}: unknown store type {given!r} "
                         "(PEM or PKCS12; JKS must be converted to PKCS12)")
    if given == "JKS":
        raise _jks_refusal(origin(type_key), location)
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise StoreError(f"{origin(location_key)}: cannot read {location}: "
                         f"{exc.strerror or exc}") from None
    if not given:
        if data.startswith(_JKS_MAGIC):
            raise _jks_refusal(origin(location_key), location)
        given = "PEM" if _PEM in data else "PKCS12"
    return given, data


def _pkcs12(data: bytes, password: str, key: str) -> tuple[object, object, list[object]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        loaded = pkcs12.load_key_and_certificates(data, password.encode() or None)
    except ValueError:
        raise StoreError(f"{key}: not a PKCS12 store, or the password is wrong") from None
    return loaded[0], loaded[1], list(loaded[2])


def _load_chain(ctx: ssl.SSLContext, chain_pem: bytes, key_pem: bytes,
                password: str | None, key_name: str) -> None:
    """``load_cert_chain`` from in-memory PEM, through one private temporary file."""
    fd, path = tempfile.mkstemp(prefix="odradek-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(key_pem.rstrip() + b"\n" + chain_pem.rstrip() + b"\n")
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise StoreError(f"{key_name}: cannot use the key and certificate chain "
                         f"({exc.reason or exc}); is the key password right?") from None
    finally:
        os.unlink(path)


def _encrypted_pem_key(key: object) -> tuple[bytes, str]:
    from cryptography.hazmat.primitives import serialization

    password = secrets.token_hex(16)
    pem = key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()))
    return pem, password


def _cert_pem(cert: object) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)  # type: ignore[attr-defined,no-any-return]


def load_keystore(ctx: ssl.SSLContext, props: Mapping[str, str],
                  origin: Origin = _same) -> bool:
    """Load the key store ``props`` describe into ``ctx``; False when none is set."""
    key_password = props.get("ssl.key.password", "") or None
    inline_key = props.get("ssl.keystore.key", "").strip()
    inline_chain = props.get("ssl.keystore.certificate.chain", "").strip()
    location = props.get("ssl.keystore.location", "").strip()
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            missing = "ssl.keystore.certificate.chain" if inline_key else "ssl.keystore.key"
            raise StoreError(f"{origin(missing)}: must be set with "
                             f"{origin('ssl.keystore.key' if inline_key else missing)}")
        given = props.get("ssl.keystore.type", "").strip().upper()
        if given and given != "PEM":
            raise StoreError(f"{origin('ssl.keystore.type')}: inline ssl.keystore.key needs "
                             f"type PEM, not {given}")
        if location:
            raise StoreError(f"{origin('ssl.keystore.location')}: set either a keystore file "
                             "or inline ssl.keystore.key, not both")
        _load_chain(ctx, inline_chain.encode(), inline_key.encode(), key_password,
                    origin("ssl.keystore.key"))
        return True
    if not location:
        return False
    kind, data = _store_type(props, "ssl.keystore.type", "ssl.keystore.location", origin)
    if kind == "PEM":
        try:
            ctx.load_cert_chain(location, password=key_password)
        except ssl.SSLError as exc:
            raise StoreError(f"{origin('ssl.keystore.location')}: {location} does not hold a "
                             f"usable key and certificate chain ({exc.reason or exc}); "
                             f"check {origin('ssl.key.password')}") from None
        return True
    key, cert, extra = _pkcs12(data, props.get("ssl.keystore.password", ""),
                               origin("ssl.keystore.location") + " / "
                               + origin("ssl.keystore.password"))
    if key is None or cert is None:
        raise StoreError(f"{origin('ssl.keystore.location')}: {location} holds no private key "
                         "with its certificate")
    key_pem, password = _encrypted_pem_key(key)
    chain = b"".join(_cert_pem(c) for c in [cert, *extra])
    _load_chain(ctx, chain, key_pem, password, origin("ssl.keystore.location"))
    return True


def load_truststore(ctx: ssl.SSLContext, props: Mapping[str, str],
                    origin: Origin = _same) -> bool:
    """Load the trust store ``props`` describe into ``ctx``; False when none is set."""
    inline = props.get("ssl.truststore.certificates", "").strip()
    location = props.get("ssl.truststore.location", "").strip()
    if inline:
        try:
            ctx.load_verify_locations(cadata=inline)
        except (ssl.SSLError, ValueError) as exc:
            raise StoreError(f"{origin('ssl.truststore.certificates')}: not PEM certificates "
                             f"({exc})") from None
        return True
    if not location:
        return False
    kind, data = _store_type(props, "ssl.truststore.type", "ssl.truststore.location", origin)
    if kind == "PEM":
        try:
            ctx.load_verify_locations(cafile=location)
        except ssl.SSLError as exc:
            raise StoreError(f"{origin('ssl.truststore.location')}: {location} holds no PEM "
                             f"certificate ({exc.reason or exc})") from None
        return True
    _, cert, extra = _pkcs12(data, props.get("ssl.truststore.password", ""),
                             origin("ssl.truststore.location") + " / "
                             + origin("ssl.truststore.password"))
    certs = [c for c in [cert, *extra] if c is not None]
    if not certs:
        raise StoreError(f"{origin('ssl.truststore.location')}: {location} holds no certificate")
    ctx.load_verify_locations(cadata=b"".join(_cert_pem(c) for c in certs).decode())
    return True


_IANA_CIPHER = re.compile(r"TLS_(?P<kex>\w+?)_WITH_(?P<cipher>\w+)")


def openssl_cipher(name: str) -> str | None:
    """A Java (IANA) cipher suite name → OpenSSL's; OpenSSL names pass through;
    None for a TLS 1.3 suite (always enabled: the stdlib cannot restrict them)."""
    name = name.strip()
    match = _IANA_CIPHER.fullmatch(name)
    if match is None:
        return None if name.startswith("TLS_") else name
    kex = {"RSA": ""}.get(match["kex"], match["kex"].replace("_", "-"))
    cipher = match["cipher"]
    gcm = re.fullmatch(r"AES_(\d+)_GCM_(SHA\d+)", cipher)
    cbc = re.fullmatch(r"AES_(\d+)_CBC_(SHA\d*)", cipher)
    if gcm:
        body = f"AES{gcm[1]}-GCM-{gcm[2]}"
    elif cbc:
        body = f"AES{cbc[1]}-{cbc[2]}"
    elif cipher == "CHACHA20_POLY1305_SHA256":
        body = "CHACHA20-POLY1305"
    else:
        body = cipher.replace("_", "-")
    return f"{kex}-{body}" if kex else body


def apply_protocols(ctx: ssl.SSLContext, props: Mapping[str, str],
                    origin: Origin = _same) -> None:
    """``ssl.protocol``, ``ssl.enabled.protocols`` and ``ssl.cipher.suites``."""
    protocol = props.get("ssl.protocol", "").strip() or "TLSv1.3"
    if protocol not in _CONTEXT_PROTOCOLS:
        raise StoreError(f"{origin('ssl.protocol')}: unknown protocol {protocol!r} "
                         f"({', '.join(sorted(_CONTEXT_PROTOCOLS))})")
    enabled = [p.strip() for p in props.get("ssl.enabled.protocols", "").split(",") if p.strip()]
    if enabled:
        unknown = [p for p in enabled if p not in _VERSIONS]
        if unknown:
            raise StoreError(f"{origin('ssl.enabled.protocols')}: unknown protocol "
                             f"{unknown[0]!r} ({', '.join(_VERSIONS)})")
        versions = sorted(_VERSIONS[p] for p in enabled)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if protocol == "TLSv1.2" and ctx.maximum_version > ssl.TLSVersion.TLSv1_2:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    suites = [s for s in props.get("ssl.cipher.suites", "").split(",") if s.strip()]
    names = [n for n in (openssl_cipher(s) for s in suites) if n]
    if names:
        try:
            ctx.set_ciphers(":".join(names))
        except ssl.SSLError:
            raise StoreError(f"{origin('ssl.cipher.suites')}: no usable cipher suite in "
                             f"{', '.join(s.strip() for s in suites)}") from None

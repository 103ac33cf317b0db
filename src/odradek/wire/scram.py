"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: the mechanisms, the key
derivation and the four messages' attribute syntax. Shared by the broker's
SCRAM server, the client's SCRAM client and the controller, which derives the
stored keys from a client's salted password (KIP-554).

Messages (``,``-separated ``name=value`` attributes, names one letter):

- client-first: GS2 header ``n,[a=<authzid>],`` then the bare part
  ``n=<saslname>,r=<client nonce>[,<extension>...]``;
- server-first: ``r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>``;
- client-final: ``c=<base64 GS2 header>,r=<nonce>,p=<base64 proof>``;
- server-final: ``v=<base64 server signature>`` or ``e=<error>``.

A saslname escapes ``=`` as ``=3D`` and ``,`` as ``=2C``.

Keys: SaltedPassword = PBKDF2-HMAC-H(password, salt, i); ClientKey =
HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey); ServerKey =
HMAC(SaltedPassword, "Server Key"). Kafka stores {salt, StoredKey, ServerKey,
iterations} per user and mechanism, never the password.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    """``SCRAM-SHA-256`` or ``SCRAM-SHA-512``."""
    id: int
    """The int8 on the wire and in records: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 UNKNOWN)."""
    hash_name: str
    """hashlib's name of H."""
    min_iterations: int = 4096
    max_iterations: int = 16384


SCRAM_SHA_256: Final = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512: Final = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: Final = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_ID: Final = {m.id: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of one user's password for one mechanism."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def hmac_(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def client_key(hash_name: str, salted: bytes) -> bytes:
    return hmac_(hash_name, salted, b"Client Key")


def credential_from_salted(hash_name: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """The stored credential for a salted password (the controller's step)."""
    stored = hashlib.new(hash_name, client_key(hash_name, salted)).digest()
    server = hmac_(hash_name, salted, b"Server Key")
    return ScramCredential(salt, stored, server, iterations)


def credential(hash_name: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted(hash_name, salted_password(hash_name, password, salt,
                                                              iterations), salt, iterations)


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    """The saslname's user name; ValueError on a bad ``=`` escape."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == ",":
            raise ValueError("unescaped ',' in a SCRAM name")
        if ch == "=":
            code = text[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ValueError("bad '=' escape in a SCRAM name")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def attributes(text: str) -> list[tuple[str, str]]:
    """``a=1,b=2`` → [(a, 1), (b, 2)]; ValueError when an item is not ``x=value``."""
    out = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ValueError("malformed SCRAM attribute")
        out.append((item[0], item[2:]))
    return out


def is_printable_nonce(nonce: str) -> bool:
    """RFC 5802's ``printable``: %x21-2B / %x2D-7E (no comma)."""
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)

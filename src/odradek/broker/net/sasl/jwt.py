"""Signed JWT validation (RS256, ES256) against a JSON Web Key Set.

:func:`parse_jwks` turns a JWKS document (``{"keys": [...]}``, RFC 7517) into
public keys by ``kid``: RSA keys (``kty`` RSA, ``n``, ``e``) and P-256 EC keys
(``kty`` EC, ``crv`` P-256, ``x``, ``y``); other keys are skipped.
:class:`JwtValidator` checks a compact JWS: header ``alg`` RS256 (PKCS#1 v1.5,
SHA-256) or ES256 (raw ``r||s`` signature, 64 bytes), the key named by ``kid``
(or the set's only key of that type when the token has no ``kid``), then the
claims as :mod:`odradek.broker.net.sasl.oauthbearer` describes. The key set is
read through a callable so the shell can refresh it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from odradek.broker.net.sasl.oauthbearer import (
    InvalidToken,
    Token,
    _json_part,
    _principal,
    _scopes,
    b64url,
    check_times,
)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
KeySet = dict[str, PublicKey]
"""Public keys by ``kid`` (a key without one is stored under ``""``)."""


def _int(value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError("a JWK number is not a base64url string")
    return int.from_bytes(b64url(value), "big")


def parse_jwks(document: str | bytes) -> KeySet:
    """The RSA and P-256 keys of a JWKS document; ValueError when it is not one."""
    try:
        data = json.loads(document)
    except ValueError as exc:
        raise ValueError(f"the JWKS is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('the JWKS has no "keys" list')
    keys: KeySet = {}
    for jwk in data["keys"]:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        kid = str(jwk.get("kid", ""))
        try:
            if jwk.get("kty") == "RSA":
                keys[kid] = rsa.RSAPublicNumbers(_int(jwk.get("e")), _int(jwk.get("n"))
                                                 ).public_key()
            elif jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
                keys[kid] = ec.EllipticCurvePublicNumbers(
                    _int(jwk.get("x")), _int(jwk.get("y")), ec.SECP256R1()).public_key()
        except (ValueError, InvalidToken):
            continue
    return keys


class JwtValidator:
    def __init__(self, keys: Callable[[], KeySet], *, audience: str = "", issuer: str = "",
                 sub_claim: str = "sub", scope_claim: str = "scope",
                 skew_s: int = 30) -> None:
        self.keys = keys
        self.audience = frozenset(a.strip() for a in audience.split(",") if a.strip())
        self.issuer = issuer
        self.sub_claim = sub_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.skew_ms = skew_s * 1000

    def _key(self, header: Mapping[str, Any], wanted: type) -> PublicKey:
        keys = self.keys()
        kid = header.get("kid")
        if kid is not None:
            key = keys.get(str(kid))
        else:
            typed = [k for k in keys.values() if isinstance(k, wanted)]
            key = typed[0] if len(typed) == 1 else None
        if key is None or not isinstance(key, wanted):
            raise InvalidToken(f"no key {kid!r} of the token's type in the JWKS")
        return key

    def validate(self, token: str, now_ms: int) -> Token:
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise InvalidToken("a signed JWT has three dot-separated parts and a signature")
        header = _json_part(parts[0], "header")
        signed = f"{parts[0]}.{parts[1]}".encode()
        signature = b64url(parts[2])
        alg = header.get("alg")
        try:
            if alg == "RS256":
                rsa_key = self._key(header, rsa.RSAPublicKey)
                assert isinstance(rsa_key, rsa.RSAPublicKey)
                rsa_key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
            elif alg == "ES256":
                ec_key = self._key(header, ec.EllipticCurvePublicKey)
                assert isinstance(ec_key, ec.EllipticCurvePublicKey)
                if len(signature) != 64:
                    raise InvalidToken("an ES256 signature is 64 bytes")
                der = encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                           int.from_bytes(signature[32:], "big"))
                ec_key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
            else:
                raise InvalidToken(f"unsupported JWT algorithm {alg!r} (RS256, ES256)")
        except InvalidSignature:
            raise InvalidToken("the JWT signature does not verify") from None
        claims = _json_part(parts[1], "payload")
        expiry = check_times(claims, now_ms, self.skew_ms)
        if self.issuer and claims.get("iss") != self.issuer:
            raise InvalidToken("the JWT's issuer is not the expected one")
        if self.audience:
            aud = claims.get("aud")
            auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
            if not auds & self.audience:
                raise InvalidToken("the JWT's audience is not an expected one")
        principal = _principal(claims, self.sub_claim)
        return Token(principal, expiry, _scopes(claims.get(self.scope_claim)))

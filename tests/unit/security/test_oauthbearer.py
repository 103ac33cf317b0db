"""OAUTHBEARER: the client response, Kafka's unsecured JWS validator, signed
JWTs (RS256, ES256) against a JWKS, and the error challenge."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from odradek.broker.net.sasl.base import AuthenticationFailed
from odradek.broker.net.sasl.jwks import JwksCache
from odradek.broker.net.sasl.jwt import JwtValidator, parse_jwks
from odradek.broker.net.sasl.oauthbearer import (
    InvalidToken,
    OAuthBearerServer,
    UnsecuredValidator,
    parse_client_response,
)
from tests.support.sasl_tokens import unsecured_jws

NOW = int(time.time() * 1000)
"""When the module was imported (for claims); validations use :func:`_now`."""


def _now() -> int:
    return int(time.time() * 1000)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_client_response_parsing() -> None:
    assert parse_client_response(b"n,a=alice,\x01auth=Bearer tok\x01x=1\x01\x01") == (
        "alice", "tok", {"x": "1"})
    for bad in (b"n,,auth=Bearer x", b"n,,\x01auth=Basic x\x01\x01", b"q,,\x01\x01",
                b"n,,\x01noequals\x01\x01", b"\xff"):
        with pytest.raises(AuthenticationFailed):
            parse_client_response(bad)


def test_unsecured_validator() -> None:
    v = UnsecuredValidator({})
    token = v.validate(unsecured_jws("alice"), _now())
    assert token.principal == "alice" and token.expiry_ms > NOW
    custom = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user",
                                 "unsecuredValidatorRequiredScope": "read write"})
    assert custom.validate(unsecured_jws("x", user="bob", scope="read write admin"),
                           _now()).principal == "bob"
    with pytest.raises(InvalidToken, match="scope"):
        custom.validate(unsecured_jws("x", user="bob", scope="read"), _now())


def _jws(header: dict[str, Any], claims: dict[str, Any], sig: str = "") -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}.{sig}"


def _by_reason(cases: list[tuple[str, str]]) -> list[Any]:
    """Cases named by their reason: the tokens hold the time they were made,
    and test ids must be the same in every pytest-xdist worker."""
    return [pytest.param(token, why, id=why) for token, why in cases]


@pytest.mark.parametrize(("token", "why"), _by_reason([
    (_jws({"alg": "RS256"}, {"sub": "a", "exp": NOW // 1000 + 3600}), "alg"),
    (_jws({"alg": "none"}, {"sub": "a", "exp": NOW // 1000 + 3600}, "sig"), "signature"),
    (_jws({"alg": "none"}, {"sub": "a"}), "exp"),
    (_jws({"alg": "none"}, {"sub": "a", "exp": NOW // 1000 - 1}), "expired"),
    (_jws({"alg": "none"}, {"sub": "a", "exp": NOW // 1000 + 3600, "iat": NOW // 1000 + 3000}),
     "future"),
    (_jws({"alg": "none"}, {"exp": NOW // 1000 + 3600}), "principal"),
    (_jws({"alg": "none"}, {"sub": "a", "exp": "soon"}), "number"),
    ("only.two", "three"),
    ("!!.@@.", "base64url|JSON"),
]))
def test_unsecured_validator_refuses(token: str, why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        UnsecuredValidator({}).validate(token, _now())


def test_clock_skew_allows_slightly_expired() -> None:
    token = _jws({"alg": "none"}, {"sub": "a", "exp": _now() // 1000 - 1})
    assert UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "5000"}).validate(
        token, _now()).principal == "a"


def test_error_challenge_then_failure() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}))
    challenge = server.step(b"n,,\x01auth=Bearer bad.token.\x01\x01", _now())
    assert json.loads(challenge) == {"status": "invalid_token"} and not server.complete
    with pytest.raises(AuthenticationFailed) as info:
        server.step(b"\x01", _now())
    assert info.value.explicit and "invalid_token" in info.value.message


def test_authzid_must_match_principal() -> None:
    server = OAuthBearerServer(UnsecuredValidator({}))
    token = f"n,a=bob,\x01auth=Bearer {unsecured_jws('alice')}\x01\x01".encode()
    assert b"invalid_authorization_id" in server.step(token, _now())


# -- signed JWTs ---------------------------------------------------------------------------

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def _int(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def jwks_document() -> str:
    rn = RSA_KEY.public_key().public_numbers()
    en = EC_KEY.public_key().public_numbers()
    return json.dumps({"keys": [
        {"kty": "RSA", "kid": "r1", "use": "sig", "n": _int(rn.n), "e": _int(rn.e)},
        {"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(en.x.to_bytes(32, "big")),
         "y": b64(en.y.to_bytes(32, "big"))},
        {"kty": "oct", "kid": "s1", "k": "c2VjcmV0"},
    ]})


def signed_jwt(alg: str = "RS256", kid: str | None = "r1", **claims: Any) -> str:
    now = int(time.time())
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    body = {"sub": "alice", "iat": now, "exp": now + 300, "iss": "https://issuer",
            "aud": ["kafka"], **claims}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    if alg == "RS256":
        sig = RSA_KEY.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(EC_KEY.sign(signing_input.encode(),
                                                ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input}.{b64(sig)}"


def validator(**kw: Any) -> JwtValidator:
    keys = parse_jwks(jwks_document())
    return JwtValidator(lambda: keys, **{"audience": "kafka", "issuer": "https://issuer", **kw})


def test_jwks_parsing_keeps_rsa_and_p256() -> None:
    assert sorted(parse_jwks(jwks_document())) == ["e1", "r1"]
    with pytest.raises(ValueError):
        parse_jwks("[]")


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_signed_jwt_is_accepted(alg: str) -> None:
    kid = "r1" if alg == "RS256" else "e1"
    assert validator().validate(signed_jwt(alg, kid), _now()).principal == "alice"


def test_sub_claim_name() -> None:
    token = signed_jwt(client_id="svc")
    assert validator(sub_claim="client_id").validate(token, _now()).principal == "svc"


@pytest.mark.parametrize(("token", "why"), [
    (lambda: signed_jwt(aud="other"), "audience"),
    (lambda: signed_jwt(iss="https://evil"), "issuer"),
    (lambda: signed_jwt(exp=int(time.time()) - 120), "expired"),
    (lambda: signed_jwt(kid="nope"), "no key"),
    (lambda: signed_jwt("RS256", "e1"), "no key"),  # an EC key for an RSA token
    (lambda: signed_jwt()[:-4] + "AAAA", "verify"),
    (lambda: _jws({"alg": "HS256", "kid": "s1"}, {"sub": "a"}, "c2ln"), "algorithm"),
    (lambda: _jws({"alg": "none"}, {"sub": "a", "exp": 9e9}), "signature"),
])
def test_signed_jwt_is_refused(token: Any, why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator().validate(token(), _now())


def test_jwks_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(jwks_document())
    cache = JwksCache(path.as_uri())
    cache.fetch()
    assert sorted(cache()) == ["e1", "r1"]
    with pytest.raises(ValueError, match="cannot read"):
        JwksCache((tmp_path / "missing.json").as_uri()).fetch()
    with pytest.raises(ValueError, match="not a file"):
        JwksCache("ftp://x/jwks").fetch()

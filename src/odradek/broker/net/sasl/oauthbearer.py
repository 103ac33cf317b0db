"""SASL/OAUTHBEARER (RFC 7628) with Kafka's two token validators.

Client initial response: ``n,[a=<authzid>],`` then ``\\x01``-separated
``key=value`` pairs ending with ``\\x01\\x01``; ``auth=Bearer <token>`` is
required, other keys are SASL extensions (ignored here). On a bad token the
server answers a JSON error challenge ``{"status":"invalid_token"}``; the
client must reply with a single ``\\x01`` and the server then fails with that
challenge as the message. An authzid must equal the token's principal.

Validators (both return a :class:`Token`):

- :class:`UnsecuredValidator`, Kafka's default for development: an unsecured
  JWS (``header.payload.`` with header ``alg`` = ``none`` and an empty
  signature), ``exp`` required (seconds), ``iat`` optional and not in the
  future, the principal from the claim named by ``unsecuredValidatorPrincipalClaimName``
  (``sub``), the scope claim ``unsecuredValidatorScopeClaimName`` (``scope``)
  holding every scope of ``unsecuredValidatorRequiredScope``; clock skew
  ``unsecuredValidatorAllowableClockSkewMs`` (0).
- :class:`JwtValidator`: a signed JWT (RS256 or ES256) verified with a key of a
  JWKS (by ``kid``, or the only key when the token names none), ``exp``
  required, ``iat``/``nbf`` checked, ``aud`` sharing one value with
  ``sasl.oauthbearer.expected.audience`` (if set), ``iss`` equal to
  ``sasl.oauthbearer.expected.issuer`` (if set), principal from
  ``sasl.oauthbearer.sub.claim.name`` (``sub``), clock skew
  ``sasl.oauthbearer.clock.skew.seconds`` (30). The key set is fetched and
  refreshed by the shell (:mod:`odradek.broker.net.sasl.jwks`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.net.sasl.base import AuthenticationFailed

OAUTHBEARER = "OAUTHBEARER"


class InvalidToken(Exception):
    """The token is refused; the message says why (logged, not sent)."""


@dataclass(frozen=True, slots=True)
class Token:
    principal: str
    expiry_ms: int
    scopes: frozenset[str] = frozenset()

    def __repr__(self) -> str:  # never the token itself
        return f"Token(principal={self.principal!r}, expiry_ms={self.expiry_ms})"


class Validator(Protocol):
    def validate(self, token: str, now_ms: int) -> Token: ...


def b64url(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken("a token part is not base64url") from None


def _json_part(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(b64url(part))
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken(f"the token's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"the token's {what} is not a JSON object")
    return value


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"the token has no {name!r} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"the token's {name!r} claim is not a number")
    return float(value)


def _scopes(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise InvalidToken("the token's scope claim is neither a string nor a list of strings")


def check_times(claims: Mapping[str, Any], now_ms: int, skew_ms: int) -> int:
    """The expiry in ms; InvalidToken when expired, or issued/valid only in the future."""
    exp = _number(claims, "exp", True)
    assert exp is not None
    expiry_ms = int(exp * 1000)
    if now_ms - skew_ms >= expiry_ms:
        raise InvalidToken("the token has expired")
    for name in ("iat", "nbf"):
        value = _number(claims, name, False)
        if value is not None and value * 1000 > now_ms + skew_ms:
            raise InvalidToken(f"the token's {name!r} is in the future")
    iat = _number(claims, "iat", False)
    if iat is not None and iat > exp:
        raise InvalidToken("the token expires before it was issued")
    return expiry_ms


def _principal(claims: Mapping[str, Any], claim: str) -> str:
    value = claims.get(claim)
    if not isinstance(value, str) or not value.strip():
        raise InvalidToken(f"the token has no principal claim {claim!r}")
    return value


class UnsecuredValidator:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName") or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName") or "scope"
        self.required_scope = frozenset(
            s for s in options.get("unsecuredValidatorRequiredScope", "").replace(",", " ").split()
        )
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0") or "0"
        try:
            self.skew_ms = int(skew)
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs: not an integer: "
                             f"{skew!r}") from None
        if self.skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs: must not be negative")

    def validate(self, token: str, now_ms: int) -> Token:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("an unsecured JWS has three dot-separated parts")
        header = _json_part(parts[0], "header")
        if header.get("alg") != "none":
            raise InvalidToken("an unsecured JWS must have alg 'none'")
        if parts[2]:
            raise InvalidToken("an unsecured JWS has an empty signature")
        claims = _json_part(parts[1], "payload")
        expiry = check_times(claims, now_ms, self.skew_ms)
        principal = _principal(claims, self.principal_claim)
        scopes = _scopes(claims.get(self.scope_claim))
        missing = self.required_scope - scopes
        if missing:
            raise InvalidToken(f"the token lacks the required scope {sorted(missing)}")
        return Token(principal, expiry, scopes)


def parse_client_response(token: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, bearer token, extensions) of a client initial response."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: not UTF-8",
                                   explicit=True) from None
    cbind, sep, rest = text.partition(",")
    authz, sep2, kvpairs = rest.partition(",")
    if (cbind not in ("n", "y") or not sep or not sep2 or (authz and not authz.startswith("a="))
            or not kvpairs.startswith("\x01") or not kvpairs.endswith("\x01\x01")):
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message", explicit=True)
    pairs: dict[str, str] = {}
    for item in kvpairs[1:-2].split("\x01"):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: bad key=value",
                                       explicit=True)
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, bearer = auth.partition(" ")
    if scheme.lower() != "bearer" or not bearer.strip():
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no auth=Bearer",
                                   explicit=True)
    return authz[2:], bearer.strip(), pairs


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(self, validator: Validator, log: Callable[[str], None] | None = None) -> None:
        self._validator = validator
        self._log = log
        self._token: Token | None = None
        self._error: str | None = None
        self._done = False

    def __repr__(self) -> str:
        return f"OAuthBearerServer(complete={self.complete})"

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        return self._token.principal if self._token is not None else ""

    @property
    def credential_expiry_ms(self) -> int | None:
        return self._token.expiry_ms if self._token is not None else None

    def step(self, token: bytes, now_ms: int) -> bytes:
        if self._done:
            raise AuthenticationFailed("Unexpected OAUTHBEARER message", explicit=True)
        if self._error is not None:
            self._done = True
            if token == b"\x01":
                raise AuthenticationFailed(self._error, explicit=True)
            raise AuthenticationFailed("Invalid OAUTHBEARER message after an error challenge",
                                       explicit=True)
        try:
            authzid, bearer, _extensions = parse_client_response(token)
        except AuthenticationFailed:
            self._done = True
            raise
        try:
            valid = self._validator.validate(bearer, now_ms)
        except InvalidToken as exc:
            if self._log is not None:
                self._log(f"OAUTHBEARER token refused: {exc}")
            self._error = json.dumps({"status": "invalid_token"})
            return self._error.encode()
        if authzid and authzid != valid.principal:
            self._error = json.dumps({"status": "invalid_authorization_id"})
            return self._error.encode()
        self._token = valid
        self._done = True
        return b""

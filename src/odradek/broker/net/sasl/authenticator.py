"""One connection's SASL authentication, as a pure state machine (Kafka's
``SaslServerAuthenticator`` rules). The pipeline's ``authenticate`` stage
(:mod:`odradek.broker.net.sasl.stage`) feeds it each request's API key and the
SASL requests' contents, and does what it answers.

States and what each accepts (any other request closes the connection):

=============  ==============================================================
``initial``    ApiVersions (answered normally, once) or SaslHandshake
``versions``   SaslHandshake
``auth``       the mechanism's tokens: SaslAuthenticate (handshake v1) or raw
               frames (handshake v0); a SaslHandshake here is answered
               ILLEGAL_SASL_STATE and the connection closed
``complete``   everything (handlers answer SaslHandshake/SaslAuthenticate
               ILLEGAL_SASL_STATE), but a SaslHandshake starts a
               re-authentication when the session has a lifetime (KIP-368);
               once the lifetime is over only a SaslHandshake is accepted
``reauth``     SaslAuthenticate tokens; other requests while the old session
               is still valid
``failed``     nothing: the connection closes
=============  ==============================================================

Handshake: an unknown or disabled mechanism answers UNSUPPORTED_SASL_MECHANISM
and closes; the answer always lists the enabled mechanisms. Tokens: a
mechanism failure answers SASL_AUTHENTICATION_FAILED with the mechanism's
explicit message or a generic one, and the connection closes after
``connection.failed.authentication.delay.ms`` (raw v0 tokens: closed, no
answer). Success sets the principal ``User:<authorization id>``; with
``connections.max.reauth.ms`` > 0 the session lasts that long (less if the
credential expires sooner: an OAUTHBEARER token's ``exp``), reported as
``SessionLifetimeMs`` to SaslAuthenticate v1+ clients. A re-authentication
must use the same mechanism and end with the same principal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from odradek.broker.net.sasl.base import AuthenticationFailed, MechanismServer, generic_failure
from odradek.wire.errors import ErrorCode

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class Verdict(Enum):
    PROCEED = "proceed"
    """On through the pipeline to the handler."""
    SASL = "sasl"
    """The stage answers it from this session (handshake or token)."""
    CLOSE = "close"
    """Close the connection without an answer."""


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    error: int
    mechanisms: list[str]
    close: bool = False
    raw_tokens: bool = False
    """Handshake v0: the tokens that follow are raw size-prefixed frames."""


@dataclass(frozen=True, slots=True)
class TokenAnswer:
    error: int
    message: str | None
    token: bytes
    session_lifetime_ms: int = 0
    close_after_delay: bool = False
    """Failed: answer, then close after ``connection.failed.authentication.delay.ms``."""
    done: bool = False
    """Authentication (or re-authentication) succeeded with this token."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """A listener's SASL settings (:mod:`odradek.broker.net.sasl.settings` reads them)."""

    mechanisms: tuple[str, ...]
    """The enabled mechanisms this broker can serve, in configured order."""
    servers: dict[str, Callable[[], MechanismServer]]
    """A fresh mechanism server for each authentication, by mechanism name."""
    reauth_ms: dict[str, int]
    """``connections.max.reauth.ms`` by mechanism (0: sessions never expire)."""
    max_receive_size: int = 524288
    failed_delay_ms: int = 100


class SaslSession:
    def __init__(self, settings: SessionSettings) -> None:
        self.settings = settings
        self.state = "initial"
        self.mechanism = ""
        self.principal = ""
        """``User:<name>`` once authenticated, else empty."""
        self.expiry_ms: int | None = None
        """When the authenticated session ends (None: never)."""
        self.close_reason = ""
        self.reauthentications = 0
        """Successful re-authentications on this connection."""
        self._server: MechanismServer | None = None
        self._v1 = False
        self._reauth = False

    def __repr__(self) -> str:
        return f"SaslSession({self.state}, {self.mechanism or '-'}, {self.principal or '-'})"

    @property
    def authenticated(self) -> bool:
        return self.state in ("complete", "reauth")

    def expired(self, now_ms: int) -> bool:
        return self.expiry_ms is not None and now_ms >= self.expiry_ms

    def admit(self, api_key: int, now_ms: int) -> Verdict:
        """What to do with a request of ``api_key`` arriving now."""
        state = self.state
        if state == "initial":
            if api_key == API_VERSIONS:
                self.state = "versions"
                return Verdict.PROCEED
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Verdict.SASL
        elif state == "versions":
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Verdict.SASL
        elif state == "auth":
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Verdict.SASL
            self.state = "failed"
            self.close_reason = f"API {api_key} during SASL authentication (ILLEGAL_SASL_STATE)"
            return Verdict.CLOSE
        elif state == "complete":
            if api_key == SASL_HANDSHAKE and self.expiry_ms is not None:
                return Verdict.SASL
            if self.expired(now_ms):
                self.state = "failed"
                self.close_reason = "the SASL session expired (connections.max.reauth.ms)"
                return Verdict.CLOSE
            return Verdict.PROCEED
        elif state == "reauth":
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Verdict.SASL
            if self.expired(now_ms):
                self.state = "failed"
                self.close_reason = "the SASL session expired during re-authentication"
                return Verdict.CLOSE
            return Verdict.PROCEED
        if state != "failed":
            self.state = "failed"
            self.close_reason = f"API {api_key} before SASL authentication"
        return Verdict.CLOSE

    def handshake(self, version: int, mechanism: str) -> HandshakeAnswer:
        enabled = list(self.settings.mechanisms)
        if self.state in ("auth", "reauth") or (self.state == "complete" and version < 1):
            self.state = "failed"
            return HandshakeAnswer(ErrorCode.ILLEGAL_SASL_STATE, enabled, close=True)
        if mechanism not in self.settings.servers:
            self.state = "failed"
            return HandshakeAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled, close=True)
        self._reauth = self.state == "complete"
        self._server = self.settings.servers[mechanism]()
        if self._reauth and mechanism != self.mechanism:
            self._server = None  # the next token fails: the mechanism may not change
        else:
            self.mechanism = mechanism
        self.state = "reauth" if self._reauth else "auth"
        self._v1 = version >= 1
        return HandshakeAnswer(ErrorCode.NONE, enabled, raw_tokens=version == 0)

    def authenticate(self, token: bytes, version: int, now_ms: int) -> TokenAnswer:
        """A client token: from SaslAuthenticate ``version``, or -1 for a raw v0 frame."""
        if self.state not in ("auth", "reauth") or (version >= 0) != self._v1:
            self.state = "failed"
            return TokenAnswer(ErrorCode.ILLEGAL_SASL_STATE,
                               "SaslAuthenticate is not expected in this state", b"",
                               close_after_delay=True)
        server = self._server
        try:
            if server is None:
                raise AuthenticationFailed("The SASL mechanism may not change on "
                                           "re-authentication", explicit=True)
            reply = server.step(token, now_ms)
            if not server.complete:
                return TokenAnswer(ErrorCode.NONE, None, reply)
            principal = f"User:{server.authorization_id}"
            if self._reauth and principal != self.principal:
                raise AuthenticationFailed("Cannot change principals during "
                                           "re-authentication", explicit=True)
        except AuthenticationFailed as exc:
            self.state = "failed"
            mech = server.mechanism if server is not None else self.mechanism
            message = exc.message if exc.explicit else generic_failure(mech)
            self.close_reason = f"SASL authentication failed: {message}"
            return TokenAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, message, b"",
                               close_after_delay=True)
        self.principal = principal
        self.reauthentications += self._reauth
        self.state = "complete"
        self._server = None
        lifetime = self._lifetime(server, now_ms)
        self.expiry_ms = now_ms + lifetime if lifetime is not None else None
        reported = lifetime if lifetime is not None and version >= 1 else 0
        return TokenAnswer(ErrorCode.NONE, None, reply, reported, done=True)

    def _lifetime(self, server: MechanismServer, now_ms: int) -> int | None:
        max_ms = self.settings.reauth_ms.get(self.mechanism, 0)
        if max_ms <= 0:
            return None
        expiry = server.credential_expiry_ms
        if expiry is None:
            return max_ms
        return max(0, min(max_ms, expiry - now_ms))

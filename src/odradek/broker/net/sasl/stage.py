"""The pipeline's ``authenticate`` stage on a broker with SASL listeners.

A request on a SASL connection (its context's ``channel``, a
:class:`SaslChannel`) is first shown to the connection's
:class:`~odradek.broker.net.sasl.authenticator.SaslSession`: it goes on to its
handler, is answered here (SaslHandshake and SaslAuthenticate while
authenticating or re-authenticating), or closes the connection. A request on
any other connection passes through untouched (its handlers for SaslHandshake
and SaslAuthenticate answer ILLEGAL_SASL_STATE, as Kafka's do).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from odradek.broker.net.pipeline import Call, Proceed
from odradek.broker.net.registry import CloseConnection
from odradek.broker.net.sasl.authenticator import SaslSession, Verdict
from odradek.wire.messages.sasl_authenticate_response import SaslAuthenticateResponse
from odradek.wire.messages.sasl_handshake_response import SaslHandshakeResponse


class SaslChannel(Protocol):
    """What the stage asks of a SASL connection (``SaslConnection`` in broker/net/server.py)."""

    session: SaslSession

    def raw_tokens(self, on: bool) -> None:
        """Read the next frames as raw tokens (SaslHandshake v0) or as requests."""

    def authenticated(self, principal: str) -> None:
        """Authentication succeeded: requests from now on are ``principal``'s."""

    def close_after(self, delay_ms: int) -> None:
        """Close once the answer is written and ``delay_ms`` has passed, serving nothing more."""


def wall_ms() -> int:
    return int(time.time() * 1000)


class SaslAuthenticate:
    name = "authenticate"

    def __init__(self, now_ms: Callable[[], int] = wall_ms) -> None:
        self.now_ms = now_ms

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        channel: SaslChannel | None = call.ctx.channel
        if channel is None:
            return await proceed(call)
        session = channel.session
        now = self.now_ms()
        verdict = session.admit(call.api_key, now)
        if verdict is Verdict.PROCEED:
            return await proceed(call)
        if verdict is Verdict.CLOSE:
            raise CloseConnection(session.close_reason)
        request = call.request
        if call.api_key == 17:
            hs = session.handshake(request.api_version, request.body.mechanism)
            if hs.raw_tokens:
                channel.raw_tokens(True)
            if hs.close:
                channel.close_after(0)
            return SaslHandshakeResponse(error_code=hs.error, mechanisms=hs.mechanisms)
        answer = session.authenticate(bytes(request.body.auth_bytes), request.api_version, now)
        if answer.done:
            channel.authenticated(session.principal)
        if answer.close_after_delay:
            channel.close_after(session.settings.failed_delay_ms)
        return SaslAuthenticateResponse(
            error_code=answer.error, error_message=answer.message, auth_bytes=answer.token,
            session_lifetime_ms=answer.session_lifetime_ms)

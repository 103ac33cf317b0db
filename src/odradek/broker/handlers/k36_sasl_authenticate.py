"""SaslAuthenticate (key 36), versions 0–2.

Behaviour: on a SASL listener, after a SaslHandshake v1, the pipeline's
authenticate stage answers each token from the connection's session
(:mod:`odradek.broker.net.sasl`): the mechanism's reply, or
SASL_AUTHENTICATION_FAILED with a message (then the connection closes after
``connection.failed.authentication.delay.ms``). A request that reaches this
handler was sent with no authentication under way: ILLEGAL_SASL_STATE, as
Kafka answers.

Version notes: v1 adds SessionLifetimeMs to the answer (KIP-368
re-authentication); v2 is flexible.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.wire.messages.sasl_authenticate_response import SaslAuthenticateResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS: tuple[Access, ...] = ()  # answered before authentication


@handler(36, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext,
                 request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received with no SASL authentication "
                      "under way")

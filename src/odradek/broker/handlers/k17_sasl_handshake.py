"""SaslHandshake (key 17), versions 0–1.

Behaviour: on a SASL listener, while a connection authenticates (or
re-authenticates), the pipeline's authenticate stage answers this request
from the connection's session (:mod:`odradek.broker.net.sasl`): the enabled
mechanisms, UNSUPPORTED_SASL_MECHANISM for another one. A request that
reaches this handler comes from a connection that needs no handshake (a
PLAINTEXT listener, or one authenticated already without a session lifetime):
it is answered ILLEGAL_SASL_STATE with no mechanisms, as Kafka does.

Version notes: v1 says the tokens that follow go in SaslAuthenticate
requests; v0 that they are raw size-prefixed frames.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest
from odradek.wire.messages.sasl_handshake_response import SaslHandshakeResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS: tuple[Access, ...] = ()  # answered before authentication


@handler(17, (0, 1), access=ACCESS)
async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

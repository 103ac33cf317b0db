"""Envelope (key 58), version 0: a broker forwards a client's admin request to
the active controller in an envelope carrying the client's principal and IP
(KIP-590, :mod:`odradek.wire.envelope`); Odradek's brokers send one whenever
an authorizer is configured (broker/net/forward.py).

Behaviour: the sender needs CLUSTER_ACTION on the cluster (the ``authorize``
stage). The inner request is then served as its own API would serve it, as the
client: its cluster-level checks (as the ``authorize`` stage makes them) and
its handler's per-resource checks use the client's principal and IP. An inner
request that does not decode, or names an API or version not served, gets
INVALID_REQUEST / UNSUPPORTED_VERSION in the envelope; a controller that is
no longer active answers NOT_CONTROLLER in the envelope, and the broker
retries with the next one.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.pipeline import cluster_checks, denied_response
from odradek.broker.net.registry import Access, Deferred, handler, registration
from odradek.broker.ports import NotControllerError
from odradek.metadata.acls import CLUSTER_NAME, ResourceType
from odradek.wire import envelope
from odradek.wire.errors import ErrorCode
from odradek.wire.frames import BadRequest, parse_request
from odradek.wire.messages.envelope_request import EnvelopeRequest
from odradek.wire.messages.envelope_response import EnvelopeResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(58, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
    inner = parse_request(memoryview(request.request_data))
    if isinstance(inner, BadRequest) or inner.api_key == envelope.ENVELOPE_KEY:
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    reg = registration(inner.api_key)
    if reg is None or not reg.serves(inner.api_version) or reg.rejects(inner.api_version):
        return EnvelopeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    principal = envelope.principal_of(request) or ctx.principal
    host = envelope.host_of(request)
    inner_ctx = RequestContext(
        ctx.broker, inner.api_version, inner.header, host, inner.size, listener=ctx.listener,
        security_protocol=ctx.security_protocol, principal=principal,
        authz=ctx.authz.for_principal(principal, host), services=ctx.services)
    try:
        body = None
        for op in cluster_checks(reg):
            if not inner_ctx.authz.allowed(op, ResourceType.CLUSTER.value, CLUSTER_NAME):
                body = denied_response(reg, inner.body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       inner.api_version)
                break
        if body is None:
            body = await reg.handle(inner_ctx, inner.body)
            if isinstance(body, Deferred):
                body = await body.answer
    except NotControllerError:
        return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if body is None:
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    return EnvelopeResponse(error_code=0, response_data=envelope.response_data(
        inner.api_key, inner.api_version, inner.correlation_id, body))

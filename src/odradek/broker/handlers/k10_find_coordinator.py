"""FindCoordinator (key 10), versions 0–4.

Behaviour: this node coordinates every group and every transactional id (one
node: it leads every ``__consumer_offsets`` and ``__transaction_state``
partition); the topic is created here on first use. Any other key type is
INVALID_REQUEST.

Version notes: v1 key type, throttle and error message; v3 flexible; v4 a
batch of keys answered one coordinator each (KIP-699).
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.handlers.txn_common import txn_runtime
from odradek.broker.registry import handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type not in (0, 1):
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.INVALID_REQUEST,
                           error_message=f"unknown key type {key_type}")
    if key_type == 1 and not key:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.INVALID_REQUEST,
                           error_message="the transactional id is empty")
    ready = await (group_runtime(ctx) if key_type == 0 else txn_runtime(ctx))
    if ready is None:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           error_message="the coordinator is not available")
    endpoint = ctx.broker.endpoint_of(ctx.broker.node_id)
    if endpoint is None:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           error_message="the coordinator's broker is not registered")
    return Coordinator(key=key, node_id=ctx.broker.node_id, host=endpoint.host,
                       port=endpoint.port, error_code=0, error_message=None)


@handler(10, (0, 4))
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx, key, req.key_type) for key in req.coordinator_keys]
        )
    c = await _find(ctx, req.key, req.key_type)
    return FindCoordinatorResponse(
        error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
        host=c.host, port=c.port,
    )

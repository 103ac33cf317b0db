"""Heartbeat (key 12), versions 0–4.

Behaviour: keeps a member's session alive. NONE in Stable and
CompletingRebalance; REBALANCE_IN_PROGRESS while the group rebalances (the
member must rejoin); UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID
as for SyncGroup.

Version notes: v1 throttle time; v3 group instance id; v4 flexible.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import READ, group_allowed
from odradek.broker.handlers.group_common import cluster_topics, group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.heartbeat_request import HeartbeatRequest
from odradek.wire.messages.heartbeat_response import HeartbeatResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"),)


@handler(12, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not group_allowed(ctx, READ, req.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    instance = req.group_instance_id if ctx.api_version >= 3 else None
    now = runtime.clock.now_ms()
    try:
        resp: HeartbeatResponse = await runtime.call(
            lambda t: runtime.coordinator.heartbeat(
                t, now, req.group_id, req.member_id, instance, req.generation_id,
                lambda: cluster_topics(ctx))
        )
    except CoordinatorWriteError:  # a write failed, or the coordinator is stopping
        return HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return resp

"""SyncGroup (key 14), versions 0–5.

Behaviour: in CompletingRebalance a member's SyncGroup waits for the leader's,
which carries the assignment; the assignment is written to
``__consumer_offsets`` and then every waiting member gets its part. In a
Stable group a SyncGroup returns the member's current assignment.

Version notes: v3 group instance id; v4 flexible; v5 protocol type and name,
checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and echoed back.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import READ, group_allowed
from odradek.broker.handlers.group_common import cluster_topics, group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.classic.membership import sync_error
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.sync_group_request import SyncGroupRequest
from odradek.wire.messages.sync_group_response import SyncGroupResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"),)


@handler(14, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if not group_allowed(ctx, READ, req.group_id):
        return sync_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if ctx.api_version < 3:
        req.group_instance_id = None
    now = runtime.clock.now_ms()
    try:
        # group_id: a member syncing after the leader gets its assignment only
        # once the leader's SyncGroup's record is committed, as in Kafka.
        resp: SyncGroupResponse = await runtime.call(
            lambda t: runtime.coordinator.sync(t, now, req, lambda: cluster_topics(ctx)),
            group_id=req.group_id)
    except CoordinatorWriteError:
        return sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return resp

"""LeaveGroup (key 13), versions 0–5.

Behaviour: the members leave at once (no session timeout to wait out) and the
rest of the group rebalances. A static member may leave by instance id; an
instance id now held by another member id is FENCED_INSTANCE_ID.

Version notes: v0–2 one member id, its error at the top level; v3 a batch of
members (KIP-345) with an error each; v4 flexible; v5 a reason per member
(KIP-800), logged at INFO as Kafka does and otherwise unused.
"""

from __future__ import annotations

import logging

from odradek.broker.handlers.acl_checks import READ, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.classic.membership import Leaving
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.leave_group_request import LeaveGroupRequest
from odradek.wire.messages.leave_group_response import LeaveGroupResponse

log = logging.getLogger("odradek.groups")


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"),)


@handler(13, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not group_allowed(ctx, READ, req.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if ctx.api_version >= 5:
        for m in req.members:
            if m.reason:
                log.info("member %r leaves group %r (reason: %s)", m.member_id, req.group_id,
                         m.reason)
    legacy = ctx.api_version < 3
    leaving = (
        [Leaving(req.member_id, None)] if legacy
        else [Leaving(m.member_id, m.group_instance_id) for m in req.members]
    )
    now = runtime.clock.now_ms()
    try:
        resp: LeaveGroupResponse = await runtime.call(
            lambda t: runtime.coordinator.leave(t, now, req.group_id, leaving)
        )
    except CoordinatorWriteError:  # a write failed, or the coordinator is stopping
        return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if legacy:
        if not resp.error_code and resp.members:
            resp.error_code = resp.members[0].error_code
        resp.members = []
    return resp

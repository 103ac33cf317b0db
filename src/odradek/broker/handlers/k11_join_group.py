"""JoinGroup (key 11), versions 0–7.

Behaviour: the classic rebalance of :mod:`odradek.coordinator.membership`; a
JoinGroup waits until the rebalance completes (all members joined, or the
rebalance timeout). v4+ with no member id gets MEMBER_ID_REQUIRED and an id
(KIP-394); ``group.instance.id`` makes a static member (KIP-345).

Version notes: v0 has no rebalance timeout (the session timeout serves); v4
MEMBER_ID_REQUIRED; v5 group instance ids; v6 flexible; v7 protocol type and
a nullable protocol name in the response.
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.groups import CoordinatorWriteError
from odradek.broker.handlers.group_common import client_host, group_runtime
from odradek.broker.registry import handler
from odradek.coordinator.membership import join_error
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.join_group_response import JoinGroupResponse


@handler(11, (0, 7))
async def handle(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    runtime = await group_runtime(ctx)
    if runtime is None:
        resp = join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
    else:
        if version < 5:
            req.group_instance_id = None
        now = runtime.clock.now_ms()
        host = client_host(ctx)
        try:
            resp = await runtime.call(
                lambda t: runtime.coordinator.join(
                    t, now, version, req, ctx.client_id or "", host
                )
            )
        except CoordinatorWriteError:
            resp = join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
    if version < 7 and resp.protocol_name is None:
        resp.protocol_name = ""
    return resp

"""JoinGroup (key 11), versions 0–9.

Behaviour: the classic rebalance of :mod:`odradek.coordinator.classic.membership`; a
JoinGroup waits until the rebalance completes (all members joined, or the
rebalance timeout). v4+ with no member id gets MEMBER_ID_REQUIRED and an id
(KIP-394); ``group.instance.id`` makes a static member (KIP-345).

Version notes: v0 has no rebalance timeout (the session timeout serves); v4
MEMBER_ID_REQUIRED; v5 group instance ids; v6 flexible; v7 protocol type and
a nullable protocol name in the response; v8 the client's reason for joining
(KIP-800), logged at DEBUG (clients send one with every rejoin) and otherwise
unused; v9 ``skip_assignment``
in the response, which only a KIP-848 coordinator running the assignor for a
classic group's leader sets: always false here. Versions 0–1, which Kafka 4.0
dropped (KIP-896), stay served: they are implemented and tested, dropping them
would only turn away older clients, and Kafka 4.1 advertises JoinGroup 0–9
again.
"""

from __future__ import annotations

import logging

from odradek.broker.handlers.acl_checks import READ, group_allowed
from odradek.broker.handlers.group_common import client_host, cluster_topics, group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.classic.membership import join_error
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.join_group_response import JoinGroupResponse

log = logging.getLogger("odradek.groups")


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"),)


@handler(11, (0, 9), access=ACCESS)
async def handle(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if version >= 8 and req.reason:
        log.debug("member %r joins group %r (reason: %s)", req.member_id, req.group_id, req.reason)
    runtime = await group_runtime(ctx)
    if not group_allowed(ctx, READ, req.group_id):
        resp = join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, req.member_id)
    elif runtime is None:
        resp = join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
    else:
        if version < 5:
            req.group_instance_id = None
        now = runtime.clock.now_ms()
        host = client_host(ctx)
        try:
            resp = await runtime.call(
                lambda t: runtime.coordinator.join(
                    t, now, version, req, ctx.client_id or "", host,
                    lambda: cluster_topics(ctx))
            )
        except CoordinatorWriteError:
            resp = join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
    if version < 7 and resp.protocol_name is None:
        resp.protocol_name = ""
    resp.skip_assignment = False
    return resp

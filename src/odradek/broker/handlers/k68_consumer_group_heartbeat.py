"""ConsumerGroupHeartbeat (key 68), versions 0–1: KIP-848's consumer group protocol.

Behaviour: see :mod:`odradek.coordinator.consumer.membership` (join with
epoch 0, leave with -1 or -2, epochs, server-side assignment, incremental
revocation). The answer is sent once the group's records are in
``__consumer_offsets``. Errors: INVALID_REQUEST for a malformed first request,
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, GROUP_MAX_SIZE_REACHED,
GROUP_ID_NOT_FOUND for a classic group with members, and the coordinator's
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE;
UNSUPPORTED_VERSION (and nothing else) while the protocol is off
(``group.version`` 0, or ``group.coordinator.rebalance.protocols`` without
``consumer``).

Version notes: v1 (Kafka 4.0) adds the subscribed topic regex, and the client
chooses its member id (KIP-1082: an empty one is INVALID_REQUEST); with v0 the
coordinator gives a joining member its id.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE, READ, denied_topics, group_allowed
from odradek.broker.handlers.group_common import (
    client_host,
    cluster_topics,
    consumer_protocol_enabled,
    group_runtime,
)
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.consumer.membership import Caller
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from odradek.wire.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"), Access("DESCRIBE", "TOPIC", "each subscribed topic"))


@handler(68, (0, 1), access=ACCESS)
async def handle(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not consumer_protocol_enabled(ctx):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if not group_allowed(ctx, READ, req.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.subscribed_topic_names and denied_topics(ctx, DESCRIBE, req.subscribed_topic_names):
        # a client may not subscribe to (and so learn of) topics it may not describe
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    caller = Caller(ctx.client_id or "", client_host(ctx), ctx.api_version)
    now = runtime.clock.now_ms()
    topics = cluster_topics(ctx)
    try:
        resp: ConsumerGroupHeartbeatResponse = await runtime.call(
            lambda t: runtime.coordinator.consumer_heartbeat(t, now, req, caller, topics))
    except CoordinatorWriteError:
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return resp

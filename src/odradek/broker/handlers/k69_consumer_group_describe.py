"""ConsumerGroupDescribe (key 69), versions 0–1: KIP-848 consumer groups.

Behaviour: each group's state (Empty, Assigning, Reconciling, Stable), group
and assignment epochs, assignor, and members with their epochs,
subscriptions, current and target assignments (topic ids and names). A group
that does not exist, or is a classic group, is GROUP_ID_NOT_FOUND; authorized
operations are not computed (-2^31), as elsewhere. While the consumer protocol
is off (``group.version`` 0) every group is UNSUPPORTED_VERSION, as in Kafka.

Version notes: v1 (Kafka 4.0, KIP-1099) gives each member's type (1: the
consumer protocol; Odradek has no classic members in consumer groups).
"""

from __future__ import annotations

import uuid

from odradek.broker.handlers.acl_checks import (
    DESCRIBE,
    GROUP,
    authorized_operations,
    group_allowed,
)
from odradek.broker.handlers.group_common import consumer_protocol_enabled, group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.wire.messages.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "GROUP"),)


@handler(69, (0, 1), access=ACCESS)
async def handle(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    if not consumer_protocol_enabled(ctx):
        return ConsumerGroupDescribeResponse(groups=[
            DescribedGroup(error_code=ErrorCode.UNSUPPORTED_VERSION, group_id=gid)
            for gid in req.group_ids])
    runtime = await group_runtime(ctx)
    by_id = ctx.broker.image.by_id

    def topic_name(tid: uuid.UUID) -> str | None:
        return by_id.get(tid)

    unsettled = await runtime.settled(req.group_ids) if runtime is not None else set()
    groups = []
    for gid in req.group_ids:
        if not group_allowed(ctx, DESCRIBE, gid):
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                         group_id=gid))
        elif runtime is None:
            groups.append(DescribedGroup(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                         group_id=gid))
        elif gid in unsettled:  # its writes are not committed (yet): no dirty read
            groups.append(DescribedGroup(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                         group_id=gid))
        else:
            described = runtime.coordinator.consumer_describe(gid, topic_name)
            if req.include_authorized_operations:
                described.authorized_operations = authorized_operations(ctx, GROUP, gid)
            groups.append(described)
    return ConsumerGroupDescribeResponse(groups=groups)

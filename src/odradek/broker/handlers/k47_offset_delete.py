"""OffsetDelete (key 47), version 0.

Behaviour: deletes a group's committed offsets for the given partitions
(tombstones). GROUP_ID_NOT_FOUND for an unknown group; a partition of a topic
the group's members subscribe to gets GROUP_SUBSCRIBED_TO_TOPIC (an active
consumer group may not lose the offsets it is using).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import BY_NAME, DELETE, READ, denied_topics, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.offset_delete_request import OffsetDeleteRequest
from odradek.wire.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DELETE", "GROUP"), Access("READ", "TOPIC"))


@handler(47, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not group_allowed(ctx, DELETE, req.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return OffsetDeleteResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    denied = denied_topics(ctx, READ, req.topics, BY_NAME)
    wanted = [(t.name, p.partition_index) for t in req.topics if t.name not in denied
              for p in t.partitions]
    try:
        code, errors = await runtime.call(
            lambda t: runtime.coordinator.delete_offsets(t, req.group_id, wanted)
        )
    except CoordinatorWriteError:
        return OffsetDeleteResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if code:
        return OffsetDeleteResponse(error_code=code)
    errors.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in req.topics if t.name in denied for p in t.partitions})
    return OffsetDeleteResponse(error_code=0, topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(
                partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
            )
            for p in t.partitions
        ])
        for t in req.topics
    ])

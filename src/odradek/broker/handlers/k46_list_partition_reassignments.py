"""ListPartitionReassignments (key 46), version 0 (KIP-455): the reassignments
under way, from the metadata image (null topics: all of them), each with its
replicas and the replicas being added and removed. Forwarded to the active
controller in a cluster, as Kafka's brokers do."""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import partition_changes as pc
from odradek.wire.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from odradek.wire.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(46, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest,
                 ) -> ListPartitionReassignmentsResponse:
    wanted = (None if request.topics is None else
              {(t.name, p) for t in request.topics for p in t.partition_indexes})
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for r in pc.list_reassignments(ctx.broker.image):
        if wanted is not None and (r.topic, r.partition) not in wanted:
            continue
        by_topic.setdefault(r.topic, []).append(OngoingPartitionReassignment(
            r.partition, list(r.replicas), list(r.adding_replicas), list(r.removing_replicas)))
    return ListPartitionReassignmentsResponse(error_message=None, topics=[
        OngoingTopicReassignment(t, ps) for t, ps in by_topic.items()])

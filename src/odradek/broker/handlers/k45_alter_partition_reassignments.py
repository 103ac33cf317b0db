"""AlterPartitionReassignments (key 45), version 0 (KIP-455).

Behaviour: decided by the active controller (forwarded from other nodes) with
``partition_changes.alter_reassignment``: a partition's replicas become the
union of the current and the target ones (the new ones listed as adding, the
dropped ones as removing); the new replicas' brokers start fetching, and once
every target replica is in the ISR the controller completes the move (the
replicas become the target, a removed leader hands over). A null replica list
cancels a reassignment under way (NO_REASSIGNMENT_IN_PROGRESS when there is
none). Bad targets get INVALID_REPLICA_ASSIGNMENT; an unknown partition
UNKNOWN_TOPIC_OR_PARTITION. The copying is throttled only as the
``*.replication.throttled.rate`` and ``*.replication.throttled.replicas``
configs say (broker/replica/throttle.py; ``odradek reassign --throttle`` sets
them).
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import partition_changes as pc
from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from odradek.wire.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)


def error_response(request: AlterPartitionReassignmentsRequest,
                   code: int) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=code, responses=[
        ReassignableTopicResponse(t.name, [
            ReassignablePartitionResponse(p.partition_index, code, None) for p in t.partitions])
        for t in request.topics])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


@handler(45, (0, 0), error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest,
                 ) -> AlterPartitionReassignmentsResponse:
    answers: list[ReassignableTopicResponse] = []

    def decide(image: MetadataImage) -> Outcome:
        answers.clear()
        records = []
        for topic in request.topics:
            out = []
            for p in topic.partitions:
                outcome = pc.alter_reassignment(image, topic.name, p.partition_index, p.replicas)
                if not outcome.error:
                    records.extend(outcome.records)
                out.append(ReassignablePartitionResponse(
                    p.partition_index, outcome.error,
                    outcome.message if outcome.error else None))
            answers.append(ReassignableTopicResponse(topic.name, out))
        return Outcome(records=records)

    outcome = await ctx.broker.write(decide)
    if outcome.error:
        return error_response(request, outcome.error)
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None,
                                               responses=answers)

"""ElectLeaders (key 43), versions 0–2: preferred or unclean leader election.

Behaviour: decided by the active controller (other nodes forward the request,
broker/control/controller_channel.py) with ``partition_changes.elect_leaders``: a
PREFERRED election (type 0) makes the first replica leader if it is live and
in the ISR (already leader: ELECTION_NOT_NEEDED; not eligible:
PREFERRED_LEADER_NOT_AVAILABLE); an UNCLEAN one (type 1) gives a leaderless
partition the first live ISR member, else the first live replica (the ISR
becomes that replica alone; ELIGIBLE_LEADERS_NOT_AVAILABLE when none is live).
Null ``topic_partitions`` means every partition, and then only the partitions
that changed are listed. An unknown partition gets UNKNOWN_TOPIC_OR_PARTITION.

Version notes: v1 ``election_type`` and the top-level ``error_code``; v2
flexible.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import partition_changes as pc
from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.elect_leaders_request import ElectLeadersRequest
from odradek.wire.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)


def error_response(request: ElectLeadersRequest, code: int) -> ElectLeadersResponse:
    """``code`` for every partition asked (the top-level error is v1+ only)."""
    return ElectLeadersResponse(replica_election_results=[
        ReplicaElectionResult(t.topic, [PartitionResult(p, code, None) for p in t.partitions])
        for t in request.topic_partitions or []])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


@handler(43, (0, 2), error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = request.election_type if ctx.api_version >= 1 else pc.PREFERRED
    wanted = (None if request.topic_partitions is None else
              [(t.topic, p) for t in request.topic_partitions for p in t.partitions])
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}

    def decide(image: MetadataImage) -> Outcome:
        found, outcome = pc.elect_leaders(image, election_type, wanted)
        results.update(found)
        return outcome

    outcome = await ctx.broker.write(decide)
    if outcome.error:
        response = error_response(request, outcome.error)
        if ctx.api_version >= 1:
            response.error_code = outcome.error
        return response
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(PartitionResult(index, code, message))
    return ElectLeadersResponse(replica_election_results=[
        ReplicaElectionResult(t, ps) for t, ps in by_topic.items()])

"""KIP-951 leader hints, for the Produce and Fetch handlers.

A partition answered NOT_LEADER_OR_FOLLOWER (or, to a fetch, FENCED_LEADER_EPOCH)
carries the leader and leader epoch the metadata image names, and the answer
lists the endpoints of those leaders that are live, so a client goes there at
once instead of refreshing its metadata first. :func:`produce_hints` and
:func:`fetch_hints` put them in each answer's own message types.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import fetch_response as fr
from odradek.wire.messages import produce_response as pr


class LeaderHints:
    """The hints of one answer: each partition's leader, and the live leaders'
    endpoints, each endpoint once."""

    def __init__(self, ctx: RequestContext) -> None:
        self._broker = ctx.broker
        self._listener = ctx.listener
        self._endpoints: dict[int, tuple[str, int]] = {}

    def leader(self, topic: str, index: int, *, endpoint: bool = True
               ) -> tuple[int, int] | None:
        """(leader id, leader epoch) of the partition in the image (None: unknown);
        with ``endpoint``, the leader's endpoint is listed if it is live."""
        t = self._broker.image.topics.get(topic)
        p = t.partitions.get(index) if t is not None else None
        if p is None:
            return None
        if endpoint and p.leader >= 0 and p.leader not in self._endpoints:
            e = self._broker.endpoint_of(p.leader, self._listener)
            if e is not None:
                self._endpoints[p.leader] = (e.host, e.port)
        return p.leader, p.leader_epoch

    def endpoints(self) -> list[tuple[int, str, int]]:
        """(node id, host, port) of the live leaders named, by node id."""
        return [(n, *self._endpoints[n]) for n in sorted(self._endpoints)]


def produce_hints(ctx: RequestContext, responses: list[pr.TopicProduceResponse]
                  ) -> list[pr.NodeEndpoint]:
    """Produce v10+: the current leader of every partition answered
    NOT_LEADER_OR_FOLLOWER, and the endpoints of those leaders that are live."""
    hints = LeaderHints(ctx)
    for topic in responses:
        for resp in topic.partition_responses:
            if resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and (
                    leader := hints.leader(topic.name, resp.index)) is not None:
                resp.current_leader = pr.LeaderIdAndEpoch(*leader)
    return [pr.NodeEndpoint(n, host, port, None) for n, host, port in hints.endpoints()]


def fetch_hints(ctx: RequestContext, response: fr.FetchResponse) -> None:
    """Fetch v12+: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    carries its current leader; v16+ lists the live leaders' endpoints."""
    hints = LeaderHints(ctx)
    for topic in response.responses:
        for data in topic.partitions:
            if topic.topic and data.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                   ErrorCode.FENCED_LEADER_EPOCH) and (
                    leader := hints.leader(topic.topic, data.partition_index,
                                           endpoint=ctx.api_version >= 16)) is not None:
                data.current_leader = fr.LeaderIdAndEpoch(*leader)
    response.node_endpoints = [fr.NodeEndpoint(n, host, port, None)
                               for n, host, port in hints.endpoints()]

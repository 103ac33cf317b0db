"""KIP-951 leader hints, for the Produce and Fetch handlers.

A partition answered NOT_LEADER_OR_FOLLOWER (or, to a fetch, FENCED_LEADER_EPOCH)
carries the leader and leader epoch the metadata image names, and the answer
lists the endpoints of those leaders that are live, so a client goes there at
once instead of refreshing its metadata first. Each handler puts the hints in
its own message types.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext


class LeaderHints:
    """The hints of one answer: each partition's leader, and the live leaders'
    endpoints, each endpoint once."""

    def __init__(self, ctx: RequestContext) -> None:
        self._broker = ctx.broker
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
            e = self._broker.endpoint_of(p.leader)
            if e is not None:
                self._endpoints[p.leader] = (e.host, e.port)
        return p.leader, p.leader_epoch

    def endpoints(self) -> list[tuple[int, str, int]]:
        """(node id, host, port) of the live leaders named, by node id."""
        return [(n, *self._endpoints[n]) for n in sorted(self._endpoints)]

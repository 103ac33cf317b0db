"""How much one connection may serve in one turn of the event loop.

A connection's task serves its buffered requests one after another, and a
request answered without waiting (a Produce with acks=1 appended on the loop,
a Metadata) never gives the loop back: without a bound, a connection with
hundreds of pipelined requests read at once serves them all in one turn while
every other connection, and every answer already made, waits. The bound is a
:class:`TurnBudget`: after ``max_requests`` requests or ``max_s`` seconds of
serving since the connection last gave the loop back (whichever comes first)
it yields, so the loop reads the other sockets, serves their requests and
writes the answers made meanwhile (answers are written in one send per
connection per turn: :class:`~odradek.broker.net.server.KafkaConnection`).

Pure: the caller passes ``now`` (``time.perf_counter()`` seconds) in.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_REQUESTS_PER_TURN = 64
"""Requests a connection serves before it yields (~100 us each for a small produce)."""
MAX_SECONDS_PER_TURN = 0.005
"""Serving time after which a connection yields. Not much less: a connection
of small requests (a paced producer, one record each) must catch up on its
backlog beside one whose every request is a large batch (that one reads about
one frame per turn anyway); with 1 ms it served ~8 small requests per ~4 ms
round, fewer than such a producer sends when the broker is short of CPU."""


@dataclass(slots=True)
class TurnBudget:
    """The requests a connection began, and when, since it last had the loop back.

    Use: before serving a request, ``if budget.spent(now)``: yield, then
    :meth:`start`; then :meth:`begin` it. Invariant: at most ``max_requests``
    requests begin in one turn, and none begins ``max_s`` or more after the
    turn's start (unless it is the turn's first: a turn always serves one).
    """

    max_requests: int = MAX_REQUESTS_PER_TURN
    max_s: float = MAX_SECONDS_PER_TURN
    started: float = 0.0
    served: int = 0

    def start(self, now: float) -> None:
        """A new turn begins at ``now`` (the connection just had the loop back)."""
        self.started = now
        self.served = 0

    def spent(self, now: float) -> bool:
        """Must the connection yield before it begins another request at ``now``?"""
        return self.served >= self.max_requests or (
            self.served > 0 and now - self.started >= self.max_s)

    def begin(self) -> None:
        """A request begins in this turn."""
        self.served += 1

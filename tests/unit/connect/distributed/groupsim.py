"""A pure model of a Connect group for the assignor's tests.

Workers hold what they run; a rebalance round builds every member's metadata
from its holdings, asks the leader's assignor, checks that nothing is handed
to a member while another member still runs it, then applies the answers as
real workers do (stop the revoked, start the assigned).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.connect.distributed.assignor import IncrementalCooperativeAssignor, Work
from odradek.connect.distributed.protocol import (
    NO_ERROR,
    Assignment,
    ConnectorTaskId,
    WorkerState,
)


@dataclass
class Worker:
    url: str
    assignor: IncrementalCooperativeAssignor
    running: set[Work] = field(default_factory=set)

    @property
    def connectors(self) -> set[str]:
        return {w for w in self.running if isinstance(w, str)}

    @property
    def tasks(self) -> set[ConnectorTaskId]:
        return {w for w in self.running if isinstance(w, ConnectorTaskId)}


class Group:
    """Members by id; the first member to join leads until it leaves."""

    def __init__(self, max_delay_ms: int, configured: dict[str, int] | None = None) -> None:
        self.max_delay_ms = max_delay_ms
        self.configured: dict[str, int] = dict(configured or {})
        self.workers: dict[str, Worker] = {}
        self.leader: str | None = None
        self.generation = 0
        self.config_offset = 10

    def join(self, member: str, url: str | None = None) -> None:
        self.workers[member] = Worker(url or f"http://{member}:8083",
                                      IncrementalCooperativeAssignor(self.max_delay_ms))
        if self.leader is None:
            self.leader = member

    def crash(self, member: str) -> None:
        """The member dies: it stops everything and drops out of the group."""
        del self.workers[member]
        if self.leader == member:
            self.leader = min(self.workers) if self.workers else None

    def metadata(self) -> dict[str, WorkerState]:
        out = {}
        for m, w in self.workers.items():
            allocation = Assignment(NO_ERROR, self.leader or "", "", self.config_offset,
                                    tuple(sorted(w.connectors)), tuple(sorted(w.tasks)))
            out[m] = WorkerState(w.url, self.config_offset, allocation)
        return out

    def round(self, now_ms: int) -> dict[str, Assignment]:
        """One rebalance; asserts no unit is started where another member runs it."""
        assert self.leader is not None
        self.generation += 1
        leader = self.workers[self.leader]
        answers = leader.assignor.assign(self.leader, leader.url, self.config_offset,
                                         self.metadata(), self.configured, now_ms,
                                         generation=self.generation)
        assert set(answers) == set(self.workers)
        for m, a in answers.items():
            for item in [*a.connectors, *a.tasks]:
                others = [o for o, w in self.workers.items() if item in w.running]
                assert not others, f"{item} given to {m} while {others} run it"
        for m, a in answers.items():
            w = self.workers[m]
            w.running -= {*a.revoked_connectors, *a.revoked_tasks}
            w.running |= {*a.connectors, *a.tasks}
        self.check_exclusive()
        return answers

    def check_exclusive(self) -> None:
        seen: dict[Work, str] = {}
        for m, w in self.workers.items():
            for item in w.running:
                assert item not in seen, f"{item} run by both {seen[item]} and {m}"
                seen[item] = m

    def wanted(self) -> set[Work]:
        out: set[Work] = set(self.configured)
        for c, n in self.configured.items():
            out |= {ConnectorTaskId(c, i) for i in range(n)}
        return out

    def running(self) -> set[Work]:
        return set().union(*(w.running for w in self.workers.values()))

    def task_counts(self) -> dict[str, int]:
        return {m: len(w.tasks) for m, w in sorted(self.workers.items())}

    def connector_counts(self) -> dict[str, int]:
        return {m: len(w.connectors) for m, w in sorted(self.workers.items())}

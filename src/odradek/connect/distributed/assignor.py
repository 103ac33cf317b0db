"""KIP-415 incremental cooperative assignment of connectors and tasks.

The group leader runs :meth:`IncrementalCooperativeAssignor.assign` once per
rebalance with every member's metadata; each member's *allocation* is what it
runs now. The answer gives each member only the *change*: work to start
(``connectors``/``tasks``) and work to stop before it rejoins (``revoked_*``).
Time is passed in (``now_ms``); the object keeps, between rounds, what it
handed out last time and the work it is holding back.

Rules, applied to connectors and to tasks separately (a connector's instance
and its tasks are independent units of work):

1. Members keep what they run. Work no longer configured (deleted connector,
   fewer tasks) is revoked from whoever runs it; work claimed by two members
   stays with the first member id (sorted) and is revoked from the others.
2. Work the leader handed out last round that no member runs now is *lost*
   (its member left). It is held back until ``max_delay_ms`` after the loss
   was first seen; meanwhile every member gets ``delay_ms`` = the time left to
   the earliest such deadline, so it rejoins then. A member with the lost
   work's old member id or REST URL (it came back) gets that work back at
   once. After the deadline the work is handed out as new work.
3. New work goes, one unit at a time, to the member with the least of that
   kind (ties: smallest member id), which also spreads lost work over the
   survivors.
4. If nothing is held back and the load is uneven (a member joined), the most
   loaded members are revoked down to ``floor``/``ceil`` of the average; that
   work is handed out in the NEXT round, once the revokers have rejoined
   without it, so no unit ever runs on two members at once.
5. If a member has read further in the config topic than the leader
   (``config_offset`` above the leader's), every member gets
   ``CONFIG_MISMATCH`` with the highest offset and nothing changes, as Kafka
   does: the leader must catch up first.

:func:`eager_assign` is the eager protocol's (v0, ``default``) assignment: every
member has stopped everything before it rejoins, and gets its whole share.

Determinism: member ids and work are sorted, so one input (and one history)
gives one output. A new leader starts with no history (and a leader told a
``generation`` that does not follow the one it last led forgets its history):
work whose member left before it took over is seen as new and handed out at
once, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.connect.distributed.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    Assignment,
    ConnectorTaskId,
    WorkerState,
)

#: A unit of work: a connector instance (its name) or one of its tasks.
Work = str | ConnectorTaskId


@dataclass(frozen=True)
class _Owner:
    member: str
    url: str


@dataclass(frozen=True)
class _Held:
    owner: _Owner
    deadline_ms: int


def _sort_key(item: Work) -> tuple[int, str, int]:
    if isinstance(item, str):
        return (0, item, -1)
    return (1, item.connector, item.task)


def _configured_work(configured: Mapping[str, int]) -> set[Work]:
    work: set[Work] = set(configured)
    for name, count in configured.items():
        work.update(ConnectorTaskId(name, i) for i in range(max(count, 0)))
    return work


def _allocation(state: WorkerState) -> list[Work]:
    a = state.allocation
    if a is None:
        return []
    return [*a.connectors, *a.tasks]


class IncrementalCooperativeAssignor:
    """The leader's assignor; keep one per worker and call it each time it leads."""

    def __init__(self, max_delay_ms: int) -> None:
        if max_delay_ms < 0:
            raise ValueError(f"scheduled.rebalance.max.delay.ms must be >= 0, got {max_delay_ms}")
        self.max_delay_ms = max_delay_ms
        self._previous: dict[Work, _Owner] = {}
        self._held: dict[Work, _Held] = {}
        self._generation: int | None = None

    @property
    def held(self) -> frozenset[Work]:
        """Work currently held back for a member that left."""
        return frozenset(self._held)

    def assign(self, leader: str, leader_url: str, config_offset: int,
               members: Mapping[str, WorkerState], configured: Mapping[str, int],
               now_ms: int, *, generation: int | None = None) -> dict[str, Assignment]:
        """Each member's assignment for this round (see the module's rules).

        ``generation`` (the JoinGroup generation, optional): if this assignor
        did not also lead the previous generation, its memory of the last
        round is stale (another member led in between) and is dropped first.
        """
        if generation is not None:
            if self._generation is not None and generation != self._generation + 1:
                self._previous.clear()
                self._held.clear()
            self._generation = generation
        if not members:
            return {}
        ids = sorted(members)
        max_offset = max(s.config_offset for s in members.values())
        if max_offset > config_offset:
            return {m: Assignment(CONFIG_MISMATCH, leader, leader_url, max_offset) for m in ids}

        wanted = _configured_work(configured)
        owned: dict[str, set[Work]] = {m: set() for m in ids}
        revoked: dict[str, set[Work]] = {m: set() for m in ids}
        claimed: dict[Work, str] = {}
        for m in ids:
            for item in _allocation(members[m]):
                if item not in wanted or item in claimed:
                    revoked[m].add(item)
                else:
                    claimed[item] = m
                    owned[m].add(item)

        assigned: dict[str, set[Work]] = {m: set() for m in ids}
        self._track_losses(wanted, claimed, now_ms)
        self._give_back(members, ids, assigned)
        expired = {w for w, h in self._held.items() if h.deadline_ms <= now_ms}
        for item in expired:
            del self._held[item]
        fresh = [w for w in wanted if w not in claimed and w not in self._held
                 and not any(w in a for a in assigned.values())]
        for kind in (str, ConnectorTaskId):
            items = sorted((w for w in fresh if isinstance(w, kind)), key=_sort_key)
            self._spread(ids, items, owned, assigned, kind)
            if not self._held:
                self._balance(ids, owned, assigned, revoked, kind)

        self._previous = {}
        for m in ids:
            for item in owned[m] | assigned[m]:
                self._previous[item] = _Owner(m, members[m].url)
        delay_ms = 0
        if self._held:
            delay_ms = max(0, min(h.deadline_ms for h in self._held.values()) - now_ms)
        return {m: self._answer(leader, leader_url, config_offset, assigned[m], revoked[m],
                                delay_ms) for m in ids}

    # -- steps ------------------------------------------------------------------

    def _track_losses(self, wanted: set[Work], claimed: Mapping[Work, str], now_ms: int) -> None:
        """Hold back what was handed out last round and is run by nobody now."""
        for item in list(self._held):
            if item not in wanted or item in claimed:
                del self._held[item]
        for item, owner in self._previous.items():
            if item in wanted and item not in claimed and item not in self._held:
                self._held[item] = _Held(owner, now_ms + self.max_delay_ms)

    def _give_back(self, members: Mapping[str, WorkerState], ids: list[str],
                   assigned: dict[str, set[Work]]) -> None:
        """Held work goes back to its member if it is here again (same id or URL)."""
        for item in sorted(self._held, key=_sort_key):
            owner = self._held[item].owner
            back = owner.member if owner.member in members else next(
                (m for m in ids if members[m].url == owner.url), None)
            if back is not None:
                assigned[back].add(item)
                del self._held[item]

    @staticmethod
    def _spread(ids: list[str], items: list[Work], owned: Mapping[str, set[Work]],
                assigned: dict[str, set[Work]], kind: type) -> None:
        """Each item to the member with the least of ``kind`` (then smallest id)."""
        load = {m: sum(isinstance(w, kind) for w in owned[m] | assigned[m]) for m in ids}
        for item in items:
            target = min(ids, key=lambda m: (load[m], m))
            assigned[target].add(item)
            load[target] += 1

    @staticmethod
    def _balance(ids: list[str], owned: dict[str, set[Work]], assigned: Mapping[str, set[Work]],
                 revoked: dict[str, set[Work]], kind: type) -> None:
        """Revoke from the most loaded members down to floor/ceil of the average.

        New work went to the least loaded, so a member above its allowance is
        only ever there by work it already runs; that is what is revoked.
        """
        load = {m: sum(isinstance(w, kind) for w in owned[m] | assigned[m]) for m in ids}
        floor, extra = divmod(sum(load.values()), len(ids))
        for rank, m in enumerate(sorted(ids, key=lambda m: (-load[m], m))):
            excess = load[m] - (floor + (1 if rank < extra else 0))
            if excess <= 0:
                continue
            mine = sorted((w for w in owned[m] if isinstance(w, kind)), key=_sort_key)
            for item in mine[len(mine) - min(excess, len(mine)):]:
                owned[m].discard(item)
                revoked[m].add(item)

    @staticmethod
    def _answer(leader: str, leader_url: str, config_offset: int, assigned: set[Work],
                revoked: set[Work], delay_ms: int) -> Assignment:
        def split(items: set[Work]) -> tuple[tuple[str, ...], tuple[ConnectorTaskId, ...]]:
            connectors = sorted(w for w in items if isinstance(w, str))
            tasks = sorted(w for w in items if isinstance(w, ConnectorTaskId))
            return tuple(connectors), tuple(tasks)

        connectors, tasks = split(assigned)
        revoked_connectors, revoked_tasks = split(revoked)
        return Assignment(NO_ERROR, leader, leader_url, config_offset, connectors, tasks,
                          revoked_connectors, revoked_tasks, delay_ms)


def eager_assign(leader: str, leader_url: str, config_offset: int,
                 members: Mapping[str, WorkerState],
                 configured: Mapping[str, int]) -> dict[str, Assignment]:
    """The eager protocol's assignment: all work dealt round-robin over sorted members.

    Connectors in name order, each followed by its tasks, go to the members in
    turn (one rotation across connectors and tasks, as Kafka's eager assignor
    does). ``CONFIG_MISMATCH`` as for the incremental assignor.
    """
    if not members:
        return {}
    ids = sorted(members)
    max_offset = max(s.config_offset for s in members.values())
    if max_offset > config_offset:
        return {m: Assignment(CONFIG_MISMATCH, leader, leader_url, max_offset) for m in ids}
    given: dict[str, set[Work]] = {m: set() for m in ids}
    turn = 0
    for name in sorted(configured):
        units: list[Work] = [name]
        units.extend(ConnectorTaskId(name, i) for i in range(max(configured[name], 0)))
        for item in units:
            given[ids[turn % len(ids)]].add(item)
            turn += 1
    return {m: IncrementalCooperativeAssignor._answer(leader, leader_url, config_offset,
                                                      given[m], set(), 0) for m in ids}

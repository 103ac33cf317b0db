"""The group coordinator as a shard of the coordinator runtime, and what readers see.

:class:`GroupShard` adapts the pure
:class:`~odradek.coordinator.coordinator.GroupCoordinator` to
:class:`~odradek.broker.coordinators.coordinator_runtime.CoordinatorShard`:
records are Kafka's ``__consumer_offsets`` records
(:mod:`odradek.coordinator.records`); a record written by a transactional
producer (TxnOffsetCommit) waits in the store until its marker; a partition
that loads holds its groups' requests (COORDINATOR_LOAD_IN_PROGRESS), one
unloaded is another broker's (NOT_COORDINATOR).

:class:`CommittedView` is what OffsetFetch answers from while a write is in
flight: for a group whose offsets a write not yet committed changed, the
offsets as they were before the oldest such write (kept until the HW passes
it), so a fetch never shows a commit that may be truncated away and never
waits for one; and, for a RequireStable fetch, the partitions a transaction's
marker (written, not committed) still leaves pending. A partition's entries
go when it loads or unloads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.common.clock import Clock
from odradek.coordinator import records as crecords
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.records import CoordinatorRecord
from odradek.coordinator.store import GroupStore
from odradek.metadata.image import MetadataImage


@dataclass
class _InFlight:
    """A write to an offsets partition that may not be committed yet."""

    end: int
    """The partition's log end after it: committed once the HW reaches it."""
    before: dict[str, dict[Any, Any]]
    """{group: its offsets before the write}, for the groups it changed."""
    unstable: dict[str, set[tuple[str, int]]]
    """{group: partitions} a transaction's offsets were pending on before the
    write (its marker)."""


class CommittedView:
    def __init__(self, store: GroupStore, high_watermark: Callable[[int], int | None]) -> None:
        self.store = store
        self.high_watermark = high_watermark
        self.uncommitted: dict[int, list[_InFlight]] = {}
        """Per partition: each write that changed committed offsets and may not
        be committed yet, oldest first."""

    def snapshot(self, groups: set[str]) -> dict[str, dict[Any, Any]]:
        """The offsets of ``groups`` now (before a write changes them)."""
        store = self.store
        return {g: dict(group.offsets) if (group := store.groups.get(g)) else {}
                for g in groups}

    def note(self, index: int, end: int, before: dict[str, dict[Any, Any]],
             unstable: dict[str, set[tuple[str, int]]] | None = None) -> None:
        """A write ending at ``end`` changed the offsets of the groups in ``before``
        (their offsets before it): readers keep those until the write commits;
        ``unstable``: the partitions a transaction's offsets were pending on
        before the write (its marker), still pending for readers until then."""
        if not before and not unstable:
            return
        self.prune(index)
        self.uncommitted.setdefault(index, []).append(_InFlight(end, before, unstable or {}))

    def drop(self, index: int) -> None:
        self.uncommitted.pop(index, None)

    def prune(self, index: int) -> None:
        writes = self.uncommitted.get(index)
        if not writes:
            return
        hw = self.high_watermark(index) or 0
        while writes and writes[0].end <= hw:
            writes.pop(0)
        if not writes:
            del self.uncommitted[index]

    def committed_offsets(self, index: int, group_id: str) -> dict[Any, Any] | None:
        """The group's committed offsets when a write in flight changed them; None
        when its offsets are all committed."""
        self.prune(index)
        for write in self.uncommitted.get(index, ()):
            if group_id in write.before:
                return write.before[group_id]
        return None

    def unstable_offsets(self, index: int, group_id: str) -> set[tuple[str, int]]:
        self.prune(index)
        out: set[tuple[str, int]] = set()
        for write in self.uncommitted.get(index, ()):
            out |= write.unstable.get(group_id, set())
        return out


class GroupShard:
    """:class:`GroupCoordinator` driven by the coordinator runtime."""

    def __init__(self, coordinator: GroupCoordinator, clock: Clock, view: CommittedView,
                 changed: Callable[[], None]) -> None:
        """``changed``: called when a partition is loaded (its members' sessions
        start again: the group shell's timer looks at the next deadline)."""
        self.coordinator = coordinator
        self.clock = clock
        self.view = view
        self.changed = changed

    def encode(self, record: CoordinatorRecord) -> tuple[bytes | None, bytes | None]:
        return crecords.encode(record)

    def decode(self, key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
        return crecords.decode(key or b"", value)

    def replay(self, index: int, offset: int, producer_id: int, producer_epoch: int,
               record: CoordinatorRecord) -> None:
        if producer_id >= 0:  # TxnOffsetCommit: pending until the producer's marker
            self.coordinator.replay_txn(producer_id, [record])
        else:
            self.coordinator.replay([record], self.clock.now_ms())

    def replay_marker(self, index: int, producer_id: int, commit: bool, offset: int) -> None:
        """``producer_id``'s transaction ended: its pending offsets apply or go. A
        marker written while the partition is served (not one replayed by a load)
        may not be committed yet: readers keep the state from before it."""
        store = self.coordinator.store
        if index not in store.loading:
            unstable: dict[str, set[tuple[str, int]]] = {}
            for group, topic, partition in store.pending_txn.get(producer_id, {}):
                unstable.setdefault(group, set()).add((topic, partition))
            self.view.note(index, offset + 1,
                           self.view.snapshot(set(unstable) if commit else set()), unstable)
        self.coordinator.replay_marker(producer_id, commit)

    def on_loading(self, index: int) -> None:
        self.view.drop(index)
        self.coordinator.store.begin_load(index)

    def on_loaded(self, index: int) -> None:
        self.coordinator.store.foreign.discard(index)
        self.coordinator.loaded(index, self.clock.now_ms())
        self.changed()

    def on_unloaded(self, index: int) -> None:
        self.view.drop(index)
        self.coordinator.store.unload(index)

    def on_metadata(self, image: MetadataImage) -> None:
        """Nothing yet: the group coordinator asks for the topics when it needs them."""

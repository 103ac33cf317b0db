"""The Raft log as the core sees it: entries with epochs, a snapshot at its start.

An :class:`Entry` is one batch of the ``__cluster_metadata`` log: it holds one or
more records and takes one offset per record, so offsets count records as in
Kafka (``[offset, end)``). Every entry carries the epoch of the leader that
wrote it; a leader appends a control entry (Kafka's LeaderChangeMessage) at the
start of its epoch, so every epoch in the log begins with an entry of its own.

Invariants the core relies on and :class:`MemoryRaftLog` keeps:

* entries are contiguous: each starts where the one before it ends, the first at
  :attr:`start_offset` (the end of the snapshot, 0 without one);
* epochs never decrease along the log;
* truncation and :meth:`install_snapshot` only cut at entry boundaries;
* :attr:`flushed_offset` ≤ :attr:`end_offset`: what a crash keeps. A voter
  reports only flushed offsets to the leader, so the quorum counts only data
  that survives a crash.

A snapshot ``(end_offset, epoch, payload)`` stands for every entry below
``end_offset``; ``epoch`` is the epoch of the last entry it covers. The payload
is opaque to the core (the metadata image in Kafka's record form).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: bool = False
    """A LeaderChange entry written by a new leader, not a state-machine record."""

    @property
    def end(self) -> int:
        return self.offset + len(self.records)


@dataclass(frozen=True, slots=True)
class Snapshot:
    end_offset: int
    epoch: int
    payload: bytes


class RaftLog(Protocol):
    """What the core needs of a log (a memory one in tests, segment files in brokers)."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    def append(self, entries: list[Entry]) -> None: ...

    def read(self, offset: int, max_entries: int) -> list[Entry]: ...

    def entry_at(self, offset: int) -> Entry | None: ...

    def truncate_to(self, offset: int) -> int: ...

    def flush(self) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def snapshot(self) -> Snapshot | None: ...

    def take_snapshot(self, end_offset: int, payload: bytes) -> Snapshot: ...

    def install_snapshot(self, snapshot: Snapshot) -> None: ...


class LogError(Exception):
    """An append or cut that would break the log's invariants (a bug in the caller)."""


class MemoryRaftLog:
    """A :class:`RaftLog` in memory; :meth:`crash` keeps only what was flushed."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._offsets: list[int] = []  # entry start offsets, for bisect
        self._snapshot: Snapshot | None = None
        self._flushed = 0

    @property
    def start_offset(self) -> int:
        return self._snapshot.end_offset if self._snapshot else 0

    @property
    def end_offset(self) -> int:
        return self._entries[-1].end if self._entries else self.start_offset

    @property
    def flushed_offset(self) -> int:
        return max(self._flushed, self.start_offset)

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._snapshot.epoch if self._snapshot else 0

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def append(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset or not entry.records:
                raise LogError(f"append at {entry.offset}, log ends at {self.end_offset}")
            if entry.epoch < self.last_epoch:
                raise LogError(f"epoch {entry.epoch} after {self.last_epoch}")
            self._entries.append(entry)
            self._offsets.append(entry.offset)

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        i = bisect.bisect_left(self._offsets, offset)
        return self._entries[i : i + max_entries]

    def entry_at(self, offset: int) -> Entry | None:
        """The entry holding ``offset``, if the log (not its snapshot) has it."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i < 0 or self._entries[i].end <= offset:
            return None
        return self._entries[i]

    def truncate_to(self, offset: int) -> int:
        """Drop every entry that ends above ``offset``; returns the new end offset."""
        i = bisect.bisect_right(self._offsets, offset)
        while i and self._entries[i - 1].end > offset:
            i -= 1
        del self._entries[i:], self._offsets[i:]
        self._flushed = min(self._flushed, self.end_offset)
        return self.end_offset

    def flush(self) -> None:
        self._flushed = self.end_offset

    def crash(self) -> None:
        """Lose what was not flushed, as a power cut would."""
        self.truncate_to(self.flushed_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch ≤ ``epoch`` in the log, the offset where it ends): the log
        end for the last epoch; the snapshot's epoch and the start offset below the
        first entry; (-1, start offset) when no epoch that old is known."""
        end = self.end_offset
        for entry in reversed(self._entries):
            if entry.epoch <= epoch:
                return entry.epoch, end
            end = entry.offset
        snap = self._snapshot
        if snap is not None and snap.epoch <= epoch:
            return snap.epoch, self.start_offset
        return -1, self.start_offset

    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def take_snapshot(self, end_offset: int, payload: bytes) -> Snapshot:
        """Replace the entries below ``end_offset`` (an entry boundary) by a snapshot."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if end_offset == self.start_offset:
            raise LogError("nothing to snapshot")
        if (i < len(self._offsets) and self._offsets[i] != end_offset) or (
            i == len(self._offsets) and end_offset != self.end_offset
        ):
            raise LogError(f"snapshot at {end_offset} is not an entry boundary")
        epoch = self._entries[i - 1].epoch
        self._snapshot = Snapshot(end_offset, epoch, payload)
        del self._entries[:i], self._offsets[:i]
        return self._snapshot

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Start over from ``snapshot`` (a follower behind the leader's log start)."""
        self._entries.clear()
        self._offsets.clear()
        self._snapshot = snapshot
        self._flushed = snapshot.end_offset

"""Idempotent-producer state of one partition: epochs and sequences.

For each producer id the table keeps the current epoch and the metadata of its
last :data:`MAX_REMEMBERED` batches (first/last sequence, first/last offset,
max timestamp). A produced batch with a producer id is checked against it
before it is appended:

* an epoch lower than the producer's current one: INVALID_PRODUCER_EPOCH
  (a zombie from before an epoch bump);
* a batch equal to a remembered one (same epoch, first and last sequence): a
  duplicate, acknowledged with the original offsets and not appended again;
* a new epoch must start at sequence 0 (unless the producer is unknown);
* otherwise the first sequence must follow the last one (wrapping after
  2^31-1 to 0): OUT_OF_ORDER_SEQUENCE_NUMBER if not. A producer whose state is
  gone (retention, DeleteRecords) may continue with any sequence, as Kafka allows.

Transactions (Kafka's ``ProducerStateManager``): a producer's first
transactional batch after its last marker opens a transaction at that batch's
base offset; a control batch (COMMIT or ABORT marker, written only by the
transaction coordinator) closes it. The table keeps the open transactions'
first offsets (the last stable offset, LSO, may not pass the earliest), the
transactions decided by a marker the high watermark has not passed yet (they
hold the LSO too, as in Kafka), and the aborted transactions
(:class:`AbortedTxn`, the entries of Kafka's ``.txnindex``) that a
read_committed Fetch returns. A marker for a producer with no open
transaction changes none of them. A marker with an epoch older than the
producer's is INVALID_PRODUCER_EPOCH; a marker from an older coordinator epoch
is TRANSACTION_COORDINATOR_FENCED.

The table is pure: :meth:`ProducerStateTable.check` decides, and
:meth:`ProducerStateTable.record` applies a batch once it is in the log. On
start-up the table is rebuilt by replaying the batch headers of the log
(:meth:`record` again, with each marker's type), so the check survives restarts.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from odradek.storage.txnfiles import AbortedEntry, SnapshotEntry
from odradek.wire.batch import NO_PRODUCER_ID, BatchHeader

MAX_REMEMBERED = 5
MAX_SEQUENCE = 0x7FFFFFFF


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    INVALID_EPOCH = "invalid_epoch"
    OUT_OF_ORDER = "out_of_order"
    COORDINATOR_FENCED = "coordinator_fenced"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


AbortedTxn = AbortedEntry
"""An aborted transaction (one entry of Kafka's ``.txnindex``): ``producer_id``'s
records from ``first_offset`` to the ABORT marker at ``last_offset``;
``last_stable_offset`` was the LSO once the marker was written."""


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_REMEMBERED))
    txn_first_offset: int = -1
    """First offset of the producer's open transaction on this partition (-1: none)."""
    coordinator_epoch: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    duplicate_of: BatchMetadata | None = None
    message: str = ""


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


_NO_PRODUCERS: Mapping[int, ProducerEntry] = MappingProxyType({})
_NO_ONGOING: Mapping[int, int] = MappingProxyType({})


class ProducerStateTable:
    """One partition's producers and transactions. Until a producer shows up, its
    four containers are shared read-only empties (:data:`_NO_PRODUCERS`, ...):
    an idle partition holds none of its own (four empty containers cost ~240
    bytes); the first change gives the table its own (``_own_*``)."""

    __slots__ = ("aborted", "ongoing", "producers", "undecided")

    def __init__(self) -> None:
        self.producers: Mapping[int, ProducerEntry] = _NO_PRODUCERS
        self.ongoing: Mapping[int, int] = _NO_ONGOING
        """Open transactions: producer id -> first offset."""
        self.undecided: Sequence[tuple[int, int]] = ()
        """(first offset, marker offset) of transactions whose marker is above the HW,
        in marker order (a list: an empty deque costs 600 bytes per partition)."""
        self.aborted: Sequence[AbortedTxn] = ()
        """Aborted transactions by marker offset (``last_offset``), rising."""

    def _own_producers(self) -> dict[int, ProducerEntry]:
        producers = self.producers
        if not isinstance(producers, dict):
            producers = self.producers = {}
        return producers

    def _own_ongoing(self) -> dict[int, int]:
        ongoing = self.ongoing
        if not isinstance(ongoing, dict):
            ongoing = self.ongoing = {}
        return ongoing

    def _own_undecided(self) -> list[tuple[int, int]]:
        undecided = self.undecided
        if not isinstance(undecided, list):
            undecided = self.undecided = list(undecided)
        return undecided

    def _own_aborted(self) -> list[AbortedTxn]:
        aborted = self.aborted
        if not isinstance(aborted, list):
            aborted = self.aborted = list(aborted)
        return aborted

    def check(self, header: BatchHeader, coordinator_epoch: int = -1) -> Check:
        """Decide what to do with a producer batch (the header's offsets are ignored).
        ``coordinator_epoch`` is a marker's (control batches only)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return Check(Verdict.APPEND)
        entry = self.producers.get(pid)
        if entry is None:
            return Check(Verdict.APPEND)
        epoch, first, last = header.producer_epoch, header.base_sequence, header.last_sequence
        if epoch < entry.epoch:
            return Check(
                Verdict.INVALID_EPOCH,
                message=f"Epoch {epoch} of producer {pid} is older than {entry.epoch}",
            )
        if header.is_control or first < 0:  # a marker, or a coordinator's batch
            if header.is_control and coordinator_epoch < entry.coordinator_epoch:
                return Check(
                    Verdict.COORDINATOR_FENCED,
                    message=f"Coordinator epoch {coordinator_epoch} of the marker for producer "
                    f"{pid} is older than {entry.coordinator_epoch}",
                )
            return Check(Verdict.APPEND)
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first and b.last_seq == last:
                    return Check(Verdict.DUPLICATE, duplicate_of=b)
            if entry.batches and not in_sequence(entry.last_seq, first):
                return Check(
                    Verdict.OUT_OF_ORDER,
                    message=f"Out of order sequence {first} for producer {pid} "
                    f"at epoch {epoch}, expected {entry.last_seq + 1}",
                )
        elif first != 0:
            return Check(
                Verdict.OUT_OF_ORDER,
                message=f"Invalid sequence {first} for new epoch {epoch} of producer {pid}",
            )
        return Check(Verdict.APPEND)

    def record(
        self, header: BatchHeader, *, commit: bool | None = None, coordinator_epoch: int = -1
    ) -> AbortedTxn | None:
        """Apply a batch that is now in the log (its header carries final offsets).
        For a control batch ``commit`` says COMMIT (True) or ABORT (False) and
        ``coordinator_epoch`` is the marker's. Returns the aborted transaction an
        ABORT marker ended (for the ``.txnindex``)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self._own_producers()[pid] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = header.max_timestamp
        if header.is_control:
            return self._end_transaction(entry, pid, header.base_offset, commit,
                                         coordinator_epoch)
        if header.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence, header.last_sequence,
                    header.base_offset, header.last_offset, header.max_timestamp,
                )
            )
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = header.base_offset
            self._own_ongoing()[pid] = header.base_offset
        return None

    def snapshot(self) -> list[SnapshotEntry]:
        """Kafka's snapshot of the table: per producer its last batch, epoch,
        coordinator epoch and open transaction (older batches are not kept)."""
        out = []
        for pid, e in sorted(self.producers.items()):
            if e.batches:
                b = e.batches[-1]
                out.append(SnapshotEntry(pid, e.epoch, b.last_seq, b.last_offset,
                                         b.last_offset - b.first_offset, b.max_timestamp,
                                         e.coordinator_epoch, e.txn_first_offset))
            else:
                out.append(SnapshotEntry(pid, e.epoch, -1, -1, 0, e.last_timestamp,
                                         e.coordinator_epoch, e.txn_first_offset))
        return out

    def load_snapshot(self, entries: list[SnapshotEntry], aborted: list[AbortedTxn]) -> None:
        """Start from a snapshot (and the aborted transactions below it)."""
        self.producers = _NO_PRODUCERS
        self.ongoing = _NO_ONGOING
        for s in entries:
            entry = ProducerEntry(s.epoch, txn_first_offset=s.current_txn_first_offset,
                                  coordinator_epoch=s.coordinator_epoch,
                                  last_timestamp=s.timestamp)
            if s.last_offset >= 0:
                entry.batches.append(BatchMetadata(
                    max(s.last_sequence - s.offset_delta, 0), s.last_sequence,
                    s.last_offset - s.offset_delta, s.last_offset, s.timestamp))
            self._own_producers()[s.producer_id] = entry
            if s.current_txn_first_offset >= 0:
                self._own_ongoing()[s.producer_id] = s.current_txn_first_offset
        self.aborted = list(aborted) if aborted else ()

    def _end_transaction(
        self, entry: ProducerEntry, pid: int, marker: int, commit: bool | None,
        coordinator_epoch: int,
    ) -> AbortedTxn | None:
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        first = entry.txn_first_offset
        if first < 0 or commit is None:
            return None  # no open transaction here: the marker changes nothing
        entry.txn_first_offset = -1
        del self._own_ongoing()[pid]
        self._own_undecided().append((first, marker))
        if commit:
            return None
        lso = min([marker + 1, *self.ongoing.values()])
        aborted = AbortedTxn(pid, first, marker, lso)
        self._own_aborted().append(aborted)
        return aborted

    def high_watermark_moved(self, high_watermark: int) -> None:
        """Forget decided transactions whose marker is now below the HW."""
        undecided = self.undecided
        below = 0
        while below < len(undecided) and undecided[below][1] < high_watermark:
            below += 1
        if below:
            del self._own_undecided()[:below]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of the earliest transaction still open or decided
        above the HW, or the HW."""
        self.high_watermark_moved(high_watermark)
        lso = high_watermark
        for first in self.ongoing.values():
            lso = min(lso, first)
        for first, marker in self.undecided:
            if marker >= high_watermark:
                lso = min(lso, first)
        return lso

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions a read_committed fetch of [fetch_offset, upper_bound)
        must report (Kafka's ``collectAbortedTransactions``)."""
        aborted = self.aborted
        i = bisect.bisect_left(aborted, fetch_offset, key=lambda a: a.last_offset)
        return [a for a in aborted[i:] if a.first_offset < upper_bound]

    def forget_below(self, log_start_offset: int) -> None:
        """Drop producers whose every remembered batch is below the log start (unless
        a transaction of theirs is open), and aborted transactions wholly below it."""
        gone = [
            pid for pid, e in self.producers.items()
            if e.batches and e.batches[-1].last_offset < log_start_offset
            and e.txn_first_offset < 0
        ]
        for pid in gone:
            del self._own_producers()[pid]
        i = bisect.bisect_left(self.aborted, log_start_offset, key=lambda a: a.last_offset)
        if i:
            del self._own_aborted()[:i]

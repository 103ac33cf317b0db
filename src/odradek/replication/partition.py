"""One partition's replicated state: the one owner of everything but the files.

After Kafka's split (``LocalLog`` under ``UnifiedLog`` under ``Partition``), a
:class:`PartitionState` owns, for one partition:

* the log (:class:`~odradek.storage.log.Log`: segments, indexes, the
  leader-epoch cache, log start and log end offsets);
* the idempotent-producer table (:mod:`odradek.replication.producer_state`);
* the leader epoch, the replica set with each replica's log end offset, and
  the ISR;
* the high watermark (HW) and the last stable offset (LSO: the HW held back
  by the first offset of the earliest open transaction, and of a decided one
  whose marker the HW has not passed), with the aborted transactions a
  read_committed fetch is told about.

Everything that appends to a partition's log or moves its HW goes through
here (import-linter and ``tests/unit/replication/test_layering.py`` hold the
rest of the code to that). It is plain code: no asyncio, no clock reads; calls
return effects (:class:`Appended`, :class:`Read`) that the IO shell
(:mod:`odradek.broker.partitions`) acts on: answer, wake fetches, fsync.

Invariants, checked by the simulation tests after every step::

    log_start_offset <= high_watermark <= log_end_offset
    high_watermark == min(LEO of every ISR member)   (never moving back on a leader)
    local replica in ISR while leader; ISR is a subset of the replicas
    last_stable_offset <= high_watermark

Appends, in order (:meth:`PartitionState.append_as_leader`):

1. full validation of the records field (sizes, framing, magic 2, CRC,
   counts, timestamps; :meth:`Log.check`) — before anything else, so a
   retried batch with a bad CRC is CORRUPT_MESSAGE, never a duplicate;
2. the producer-state check (epochs, sequences, duplicates of the last five);
3. the append (offsets from the LEO, this leader's epoch in each batch);
4. producer state recorded with the real offsets; the HW recomputed.

The HW is min over the ISR of each member's log end offset; the leader's own
is its LEO. With one replica (a single node) it follows the LEO at once.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from odradek.replication.producer_state import AbortedTxn, ProducerStateTable, Verdict
from odradek.storage.cleaner import CleanerView
from odradek.storage.errors import StorageError
from odradek.storage.log import FileSlice, Log
from odradek.storage.txnfiles import encode_snapshot
from odradek.wire.batch import ATTR_CONTROL, BatchHeader, read_batch_header
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Buffer, DecodeError
from odradek.wire.records import CONTROL_ABORT, CONTROL_COMMIT, decode_batches, read_marker

READ_UNCOMMITTED = 0
"""Consumers: up to the high watermark (Kafka's isolation level 0)."""
READ_COMMITTED = 1
"""Consumers: up to the last stable offset (isolation level 1)."""
LOG_END = -1
"""Followers: up to the log end (Kafka's FetchIsolation.LOG_END)."""


class Origin(Enum):
    """Who appends (Kafka's AppendOrigin). Both get every check, except that
    transaction markers (control batches, which a client may never send) are
    let through for ``COORDINATOR`` only. Coordinators append to
    ``__consumer_offsets``, the metadata journal and ``__transaction_state``,
    and the transaction coordinator writes markers to any partition."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append did. ``error_code`` 0 means the records are in the log (or, with
    ``duplicate``, were already: the offsets are the original ones)."""

    error_code: int = 0
    error_message: str | None = None
    first_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    hw_moved: bool = False
    """The HW moved: fetches waiting on this partition can be answered."""
    flush_due: bool = False
    """``flush.messages`` was reached: the answer waits for an fsync."""

    @property
    def appended(self) -> bool:
        return self.error_code == 0 and not self.duplicate and self.last_offset >= 0


@dataclass(frozen=True, slots=True)
class Read:
    """A fetch's view of the partition: byte ranges of whole batches, bounded by the
    HW (read_uncommitted) or the LSO (read_committed)."""

    error_code: int
    slices: Sequence[FileSlice]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: Sequence[AbortedTxn] | None = None
    """READ_COMMITTED only: the aborted transactions the data may include."""

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)


@dataclass(slots=True)
class Replica:
    broker_id: int
    log_end_offset: int = 0
    last_caught_up_ms: int = -1


@dataclass(slots=True)
class PartitionState:
    """The replicated state of one partition (see the module docstring)."""

    topic: str
    index: int
    log: Log
    local_id: int = 0
    leader_epoch: int = 0
    replicas: dict[int, Replica] = field(default_factory=dict)
    isr: set[int] = field(default_factory=set)
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    leader_id: int = -2
    """The leader's broker id; -2 (the default) means this replica leads."""

    def __post_init__(self) -> None:
        self.log.snapshot_source = self._snapshot_bytes
        self.log.cleaner_view = self._cleaner_view
        self.log.on_aborts_removed = self._aborts_removed
        if self.leader_id == -2:
            self.leader_id = self.local_id
        if not self.replicas:
            self.replicas = {self.local_id: Replica(self.local_id)}
        if not self.isr:
            self.isr = {self.local_id}
        self._rebuild()
        if self.is_leader:
            self._update_high_watermark()

    # -- views --------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed consumer may not read."""
        return self.producers.last_stable_offset(self.log.high_watermark)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    # -- leadership and followers -------------------------------------------------------

    def become_leader(self, epoch: int, replicas: Iterable[int], isr: Iterable[int]) -> bool:
        """Take the leadership at ``epoch`` with this replica set and ISR (the local
        replica is always in both). Returns whether the HW moved."""
        self.leader_epoch = epoch
        self.leader_id = self.local_id
        wanted = set(replicas) | {self.local_id}
        self.replicas = {b: self.replicas.get(b) or Replica(b) for b in sorted(wanted)}
        self.isr = (set(isr) & wanted) | {self.local_id}
        return self._update_high_watermark()

    def become_follower(self, epoch: int, leader_id: int) -> None:
        """Follow ``leader_id`` at ``epoch``: appends come only from
        :meth:`append_as_follower`, and the HW only from the leader."""
        self.leader_epoch = epoch
        self.leader_id = leader_id
        self.isr = set()

    def update_follower(self, broker_id: int, log_end_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``log_end_offset`` (its LEO). Returns whether the HW
        moved. A follower that reaches the HW is caught up (ISR expansion is the
        replication issue's; here it is only recorded)."""
        replica = self.replicas.get(broker_id)
        if replica is None or broker_id == self.local_id or not self.is_leader:
            return False
        replica.log_end_offset = min(log_end_offset, self.log_end_offset)
        if replica.log_end_offset >= self.high_watermark:
            replica.last_caught_up_ms = now_ms
        return self._update_high_watermark()

    def _update_high_watermark(self) -> bool:
        """The one place the HW moves: to min LEO over the ISR, never back."""
        leo = self.log.log_end_offset
        self.replicas[self.local_id].log_end_offset = leo
        isr = self.isr
        if len(isr) == 1:  # the leader alone (it is always in its ISR)
            target = leo
        else:
            target = min(self.replicas[b].log_end_offset for b in isr if b in self.replicas)
        moved = self.log.advance_high_watermark(target)
        if moved:
            self.producers.high_watermark_moved(self.high_watermark)
        return moved

    # -- appends ------------------------------------------------------------------------

    def append_as_leader(self, records: memoryview, origin: Origin) -> Appended:
        """Validate and append a records field (one or more batches); see the module
        docstring for the order of checks. Never raises for bad input: errors come
        back as Kafka codes in :class:`Appended`."""
        plog = self.log
        if not self.is_leader:
            return Appended(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
        try:
            checked = (plog.check(records, allow_control=origin is Origin.COORDINATOR)
                       if len(records) else None)
        except StorageError as exc:
            return Appended(exc.error_code, str(exc))
        if checked is not None and origin is Origin.CLIENT and plog.config.compact:
            problem = _keyless(records)
            if problem:
                return Appended(ErrorCode.INVALID_RECORD, problem)
        # Only batches with a producer id (or markers) touch producer state: a plain
        # batch is looked at no further than its producer id and attributes.
        stateful: list[tuple[int, BatchHeader, bool | None, int]] = []
        if checked is not None:
            rel = 0
            for pos, _, count, _ in checked.batches:
                attributes, = _ATTRIBUTES.unpack_from(records, pos + 21)
                producer_id, = _PRODUCER_ID.unpack_from(records, pos + 43)
                if producer_id >= 0 or attributes & ATTR_CONTROL:
                    h = read_batch_header(records, pos)
                    try:
                        commit, coordinator_epoch = _marker(records, pos, h)
                    except DecodeError as exc:
                        return Appended(ErrorCode.CORRUPT_MESSAGE, f"bad control record: {exc}")
                    stateful.append((rel, h, commit, coordinator_epoch))
                rel += count
        for _, h, _, coordinator_epoch in stateful:
            check = self.producers.check(h, coordinator_epoch)
            if check.verdict is Verdict.APPEND:
                continue
            if check.verdict is Verdict.DUPLICATE and checked and len(checked.batches) == 1:
                assert check.duplicate_of is not None
                return Appended(
                    first_offset=check.duplicate_of.first_offset,
                    last_offset=check.duplicate_of.last_offset,
                    log_start_offset=plog.log_start_offset, duplicate=True)
            return Appended(_VERDICT_CODES[check.verdict], check.message or None)
        try:
            info = plog.append(records, leader_epoch=self.leader_epoch, checked=checked)
        except StorageError as exc:
            return Appended(exc.error_code, str(exc))
        for rel, h, commit, coordinator_epoch in stateful:
            aborted = self.producers.record(
                dataclasses.replace(h, base_offset=info.first_offset + rel),
                commit=commit, coordinator_epoch=coordinator_epoch)
            if aborted is not None:
                plog.append_aborted(aborted)
        return Appended(
            first_offset=info.first_offset, last_offset=info.last_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
            hw_moved=self._update_high_watermark(), flush_due=info.flush_due)

    def append_as_follower(self, records: memoryview, leader_hw: int) -> Appended:
        """Append batches fetched from the leader (offsets kept, gaps allowed), then
        take the leader's HW as far as this log reaches. A fetch larger than
        ``segment.bytes`` is appended in parts at batch boundaries (each part
        fits a segment), so a small segment size never stalls a follower."""
        first, last, flush_due, start = -1, -1, False, self.log_start_offset
        for chunk in self._segment_sized(records):
            try:
                info = self.log.append_replicated(chunk)
            except StorageError as exc:
                return Appended(exc.error_code, str(exc), first_offset=first,
                                last_offset=last)
            if info.first_offset >= 0:
                first = info.first_offset if first < 0 else first
                last, start = info.last_offset, info.log_start_offset
                flush_due |= info.flush_due
                pos = 0
                while pos < len(chunk):
                    h = read_batch_header(chunk, pos)
                    try:
                        commit, coordinator_epoch = _marker(chunk, pos, h)
                    except DecodeError:
                        commit, coordinator_epoch = None, -1
                    aborted = self.producers.record(h, commit=commit,
                                                    coordinator_epoch=coordinator_epoch)
                    if aborted is not None:
                        self.log.append_aborted(aborted)
                    pos += h.size
        moved = self.log.advance_high_watermark(min(leader_hw, self.log_end_offset))
        if moved:
            self.producers.high_watermark_moved(self.high_watermark)
        return Appended(first_offset=first, last_offset=last, log_start_offset=start,
                        hw_moved=moved, flush_due=flush_due)

    def _segment_sized(self, records: memoryview) -> Iterable[memoryview]:
        limit = self.log.config.segment_bytes
        if len(records) <= limit:
            yield records
            return
        begin = pos = 0
        while pos < len(records):
            try:
                size = read_batch_header(records, pos).size
            except DecodeError:
                break  # the log's own checks report it
            if pos > begin and pos + size - begin > limit:
                yield records[begin:pos]
                begin = pos
            pos += size
        yield records[begin:]

    # -- reads and deletion ------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, isolation: int = READ_UNCOMMITTED,
             *, min_one_batch: bool = True) -> Read:
        """Whole batches from ``fetch_offset`` on, at most ``max_bytes`` (the first
        batch whole when ``min_one_batch``), below the HW (READ_UNCOMMITTED), the
        LSO (READ_COMMITTED) or, for a follower, the log end (LOG_END)."""
        hw, lso = self.high_watermark, self.last_stable_offset
        limit = (lso if isolation == READ_COMMITTED
                 else self.log_end_offset if isolation == LOG_END else hw)
        try:
            slices = self.log.read(fetch_offset, max(max_bytes, 0), max_offset=limit,
                                   min_one_batch=min_one_batch)
        except StorageError as exc:
            return Read(exc.error_code, (), hw, lso, self.log_start_offset)
        aborted = None
        if isolation == READ_COMMITTED:
            # The data ends at or below the LSO: every aborted transaction it may
            # hold starts below it (a superset of Kafka's bound is harmless).
            aborted = self.producers.aborted_between(fetch_offset, limit) if slices else []
        return Read(0, slices, hw, lso, self.log_start_offset, aborted)

    def fetchable_offset(self, isolation: int = READ_UNCOMMITTED) -> int:
        return self.last_stable_offset if isolation == READ_COMMITTED else self.high_watermark

    def delete_records(self, offset: int) -> int:
        """DeleteRecords (``-1``: up to the HW). Returns the new log start; raises
        OffsetOutOfRangeError past the HW. Producers wholly below it are forgotten."""
        low = self.log.delete_records_before(self.high_watermark if offset == -1 else offset)
        self.producers.forget_below(low)
        return low

    # -- start-up ---------------------------------------------------------------------

    def _aborts_removed(self, marker_offsets: set[int]) -> None:
        """The cleaner removed these ABORT markers (their data was already gone):
        read_committed fetches no longer report their transactions."""
        self.producers.aborted = [a for a in self.producers.aborted
                                  if a.last_offset not in marker_offsets]

    def _cleaner_view(self) -> CleanerView:
        return CleanerView(self.last_stable_offset, [
            (a.producer_id, a.first_offset, a.last_offset) for a in self.producers.aborted])

    def _snapshot_bytes(self) -> bytes:
        return encode_snapshot(self.producers.snapshot())

    def _rebuild(self) -> None:
        """Producer state (and, if its file was missing, the leader-epoch cache) from
        the newest producer snapshot at or above the log start and the batch
        headers after it (every header when there is none, or the epoch cache
        must be rebuilt). Aborted transactions below the snapshot come from the
        ``.txnindex`` files; an ABORT marker replayed here whose entry is missing
        (a crash between the marker and its entry) gets it written. A segment
        whose framing is damaged (found here after a clean shutdown, when nothing
        was validated) is recorded on the log and skipped from the damage on: the
        partition opens, and only fetches that reach the damage fail."""
        plog = self.log
        try:
            indexed = plog.txn_files.aborted(plog.segment_bases)
            snap = (plog.txn_files.latest_snapshot(plog.log_end_offset)
                    if plog.epochs.loaded else None)
        except OSError:
            indexed, snap = [], None
        start = plog.log_start_offset
        if snap is not None and snap[0] >= start:
            start = snap[0]
            self.producers.load_snapshot(
                snap[1], [a for a in indexed if start > a.last_offset >= plog.log_start_offset])
        known = set(indexed)
        epochs: list[tuple[int, int]] = []
        for h in self._iter_headers(start):
            commit, coordinator_epoch = None, -1
            if h.is_control:
                commit, coordinator_epoch = self._stored_marker(h)
            aborted = self.producers.record(h, commit=commit,
                                            coordinator_epoch=coordinator_epoch)
            if aborted is not None and aborted not in known:
                plog.append_aborted(aborted)
            epochs.append((h.partition_leader_epoch, h.base_offset))
        if not plog.epochs.loaded:
            # An unwritable file leaves the entries in memory; they are written
            # again at the next epoch change.
            with contextlib.suppress(OSError):
                plog.epochs.rebuild_from(epochs)

    def _stored_marker(self, h: BatchHeader) -> tuple[bool | None, int]:
        """The type of the marker stored at ``h`` (None: unreadable, treated as no
        marker; the damage is the log's to report)."""
        try:
            data = self.log.read_records(h.base_offset, h.size, max_offset=h.next_offset)
            return _marker(data, 0, h)
        except (DecodeError, StorageError):
            return None, -1

    def _iter_headers(self, start: int) -> Iterable[BatchHeader]:
        plog = self.log
        first = max(bisect.bisect_right(plog.segment_bases, start) - 1, 0)
        for seg in plog.segments[first:]:
            offset = seg.base_offset
            try:
                for _, header in seg.iter_headers(0):
                    offset = header.next_offset
                    if header.last_offset >= start:
                        yield header
            except DecodeError as exc:
                plog.note_damage(seg.log_path, offset, exc)


_ATTRIBUTES = struct.Struct(">h")  # at +21 of a batch
_PRODUCER_ID = struct.Struct(">q")  # at +43 of a batch

_VERDICT_CODES = {
    Verdict.INVALID_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    Verdict.OUT_OF_ORDER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.COORDINATOR_FENCED: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    Verdict.DUPLICATE: ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
}


def _keyless(records: memoryview) -> str | None:
    """Kafka's refusal of a record without a key on a compacted topic (the records
    are decoded, as Kafka's LogValidator does for compacted topics)."""
    try:
        batches = decode_batches(records)
    except DecodeError as exc:
        return f"records do not decode: {exc}"
    for _, batch in batches:
        for r in batch:
            if r.key is None:
                return "Compacted topic cannot accept message without key"
    return None


def _marker(buf: Buffer, pos: int, h: BatchHeader) -> tuple[bool | None, int]:
    """(commit?, coordinator epoch) of a control batch; (None, -1) for data. A
    control record of another type (KRaft's) is no marker."""
    if not h.is_control:
        return None, -1
    kind, coordinator_epoch = read_marker(buf, pos)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None, coordinator_epoch
    return kind == CONTROL_COMMIT, coordinator_epoch

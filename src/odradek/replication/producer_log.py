"""A partition's producer state kept in step with its log.

The idempotent and transactional producer table
(:class:`~odradek.replication.producer_state.ProducerStateTable`, pure) is fed
from batch headers the batch scan (:mod:`odradek.storage.batch_scan`) read
once, never from the bytes again:

* :func:`stateful` picks, from a client's scanned field, the batches that touch
  producer state (a producer id, or a transaction marker), with each one's
  marker read from its row's header; :func:`check` asks the table about them
  before the append and :func:`record` notes them after, with the offsets the
  log gave them;
* :func:`record_replicated` notes a follower's (or a future log's) batches;
* :func:`rebuild` rebuilds the table at start-up (or after a failed write) from
  the newest producer snapshot and the batch headers after it, and writes a
  missing ``.txnindex`` entry for an ABORT marker it replays;
* :class:`Listener` is what the log hears from the partition and tells it
  (:class:`~odradek.storage.log.LogListener`): the snapshot to store at a roll,
  a rollback after a failed write, the cleaner's view, removed ABORT markers.

An aborted transaction the table reports is written to the ``.txnindex`` of the
segment holding its marker (:meth:`~odradek.storage.log.Log.append_aborted`).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from odradek.replication.effects import Appended
from odradek.replication.producer_state import ProducerStateTable, Verdict
from odradek.storage.batch_scan import BatchRow, BatchTable
from odradek.storage.cleaner import CleanerView
from odradek.storage.errors import StorageError
from odradek.storage.log import Log
from odradek.storage.txnfiles import encode_snapshot
from odradek.wire.batch import BatchHeader
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Buffer, DecodeError
from odradek.wire.records import CONTROL_ABORT, CONTROL_COMMIT, read_marker

Stateful = list[tuple[int, BatchHeader, bool | None, int]]
"""(records before the batch in its field, header, commit? for a marker, coordinator
epoch) of each batch that touches producer state."""


class _State(Protocol):
    producers: ProducerStateTable

    @property
    def last_stable_offset(self) -> int: ...

    def reload_producers(self) -> None: ...


class Listener:
    """A partition's :class:`~odradek.storage.log.LogListener` (its producer state's
    side of the log)."""

    __slots__ = ("state",)

    def __init__(self, state: _State) -> None:
        self.state = state

    def producer_snapshot(self) -> bytes:
        return encode_snapshot(self.state.producers.snapshot())

    def writes_rolled_back(self) -> None:
        self.state.reload_producers()

    def cleaner_view(self) -> CleanerView:
        state = self.state
        return CleanerView(state.last_stable_offset, [
            (a.producer_id, a.first_offset, a.last_offset) for a in state.producers.aborted])

    def aborts_removed(self, marker_offsets: set[int]) -> None:
        """The cleaner removed these ABORT markers (their data was already gone):
        read_committed fetches no longer report their transactions."""
        producers = self.state.producers
        producers.aborted = [a for a in producers.aborted if a.last_offset not in marker_offsets]


def stateful(records: memoryview, table: BatchTable) -> Stateful | Appended:
    """The batches of a scanned client field that touch producer state; an
    :class:`Appended` error for an unreadable marker."""
    out: Stateful = []
    for rel, row in table.stateful_at():
        h = row.header()
        try:
            commit, coordinator_epoch = marker(records, row.pos, h)
        except DecodeError as exc:
            return Appended(ErrorCode.CORRUPT_MESSAGE, f"bad control record: {exc}")
        out.append((rel, h, commit, coordinator_epoch))
    return out


def check(producers: ProducerStateTable, log: Log, batches: Stateful, single: bool,
          leader_epoch: int, first: BatchRow) -> Appended | None:
    """The table's verdict on ``batches`` before they are appended: None to append,
    else the answer (a duplicate of a single-batch field answers with the
    original's offsets)."""
    for _, h, _, coordinator_epoch in batches:
        verdict = producers.check(h, coordinator_epoch)
        if verdict.verdict is Verdict.APPEND:
            continue
        if verdict.verdict is Verdict.DUPLICATE and single:
            assert verdict.duplicate_of is not None
            last = verdict.duplicate_of.last_offset
            return Appended(
                first_offset=verdict.duplicate_of.first_offset, last_offset=last,
                log_start_offset=log.log_start_offset, duplicate=True,
                leader_epoch=leader_epoch, first_batch=first,
                # Its original may still be being written: answer after that.
                write=log.last_pending_write if last >= log.log_end_offset else None)
        return Appended(VERDICT_CODES[verdict.verdict], verdict.message or None,
                        first_batch=first)
    return None


def record(producers: ProducerStateTable, log: Log, batches: Stateful,
           first_offset: int) -> None:
    """Note appended ``batches`` (the field's first record at ``first_offset``)."""
    for rel, h, commit, coordinator_epoch in batches:
        aborted = producers.record(dataclasses.replace(h, base_offset=first_offset + rel),
                                   commit=commit, coordinator_epoch=coordinator_epoch)
        if aborted is not None:
            log.append_aborted(aborted)


def record_replicated(producers: ProducerStateTable, log: Log, view: memoryview,
                      rows: Sequence[BatchRow]) -> None:
    """Note batches appended with their own offsets (a follower's, a future log's);
    an unreadable marker counts as none."""
    for row in rows:
        h = row.header()
        try:
            commit, coordinator_epoch = marker(view, row.pos, h)
        except DecodeError:
            commit, coordinator_epoch = None, -1
        aborted = producers.record(h, commit=commit, coordinator_epoch=coordinator_epoch)
        if aborted is not None:
            log.append_aborted(aborted)


def rebuild(producers: ProducerStateTable, plog: Log) -> None:
    """Producer state (and, if its file was missing, the leader-epoch cache) from
    the newest producer snapshot at or above the log start and the batch
    headers after it (every header when there is none, or the epoch cache
    must be rebuilt). Aborted transactions below the snapshot come from the
    ``.txnindex`` files; an ABORT marker replayed here whose entry is missing
    (a crash between the marker and its entry) gets it written. A segment
    whose framing is damaged (found here after a clean shutdown, when nothing
    was validated) is recorded on the log and skipped from the damage on: the
    partition opens, and only fetches that reach the damage fail."""
    try:
        indexed = plog.txn_files.aborted(plog.segment_bases)
        snap = (plog.txn_files.latest_snapshot(plog.log_end_offset)
                if plog.epochs.loaded else None)
    except OSError:
        indexed, snap = [], None
    plog.txn_files.forget_listing()  # (its one use: no memory kept for it)
    start = plog.log_start_offset
    if snap is not None and snap[0] >= start:
        start = snap[0]
        producers.load_snapshot(
            snap[1], [a for a in indexed if start > a.last_offset >= plog.log_start_offset])
    known = set(indexed)
    epochs: list[tuple[int, int]] = []
    for h in _iter_headers(plog, start):
        commit, coordinator_epoch = None, -1
        if h.is_control:
            commit, coordinator_epoch = _stored_marker(plog, h)
        aborted = producers.record(h, commit=commit,
                                        coordinator_epoch=coordinator_epoch)
        if aborted is not None and aborted not in known:
            plog.append_aborted(aborted)
        epochs.append((h.partition_leader_epoch, h.base_offset))
    if not plog.epochs.loaded:
        # An unwritable file leaves the entries in memory; they are written
        # again at the next epoch change.
        with contextlib.suppress(OSError):
            plog.epochs.rebuild_from(epochs)


def _stored_marker(plog: Log, h: BatchHeader) -> tuple[bool | None, int]:
    """The type of the marker stored at ``h`` (None: unreadable, treated as no
    marker; the damage is the log's to report)."""
    try:
        data = plog.read_records(h.base_offset, h.size, max_offset=h.next_offset)
        return marker(data, 0, h)
    except (DecodeError, StorageError):
        return None, -1


def _iter_headers(plog: Log, start: int) -> Iterable[BatchHeader]:
    if start >= plog.log_end_offset:
        return  # a snapshot at the log end (a clean shutdown): no file is read
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


VERDICT_CODES = {
    Verdict.INVALID_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    Verdict.OUT_OF_ORDER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.COORDINATOR_FENCED: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    Verdict.DUPLICATE: ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
}


def marker(buf: Buffer, pos: int, h: BatchHeader) -> tuple[bool | None, int]:
    """(commit?, coordinator epoch) of a control batch; (None, -1) for data. A
    control record of another type (KRaft's) is no marker."""
    if not h.is_control:
        return None, -1
    kind, coordinator_epoch = read_marker(buf, pos, h)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None, coordinator_epoch
    return kind == CONTROL_COMMIT, coordinator_epoch

"""The partition log: its bounds, leader epochs and transaction files over its segments.

After Kafka's split, :class:`Log` (Kafka's ``UnifiedLog``) sits on a
:class:`~odradek.storage.local_log.LocalLog` (the segment files: append bytes,
roll, read, truncate, delete, flush) and owns what gives the bytes meaning:

* the offsets that bound the log, with their invariants (checked by the
  property tests after every step)::

      log_start_offset <= high_watermark <= log_end_offset
      log_start_offset <= recovery_point <= log_end_offset   (after the first flush)
      offsets increase across batches and segments but need not be contiguous
      (compaction and skipped damage leave gaps; a leader's own appends are)

  ``log_end_offset`` (LEO) is the offset the next written record gets; the
  high watermark (HW) is moved only by the partition state machine
  (:mod:`odradek.replication.partition`) with :meth:`Log.advance_high_watermark`,
  never back except by a follower's truncation; ``log_start_offset`` is moved by
  retention and DeleteRecords, never back; below ``recovery_point`` everything
  is fsynced;
* validation and offset assignment of appends (:mod:`odradek.storage.append`:
  headers and CRC only, records never decoded; the bytes are written as they
  came with one ``pwritev``);
* the leader-epoch cache (:mod:`odradek.storage.epochs`), kept in step with the
  segments: an append in a new epoch adds an entry, truncation cuts entries;
* ``.txnindex`` files and producer snapshots (:mod:`odradek.storage.txnfiles`),
  whose contents are the partition layer's;
* retention (:mod:`odradek.storage.retention` decides, this applies),
  DeleteRecords and the cleaner's segment swap (:mod:`odradek.storage.cleaner`).

The partition layer listens through one :class:`LogListener`, handed over with
:meth:`Log.attach`: the log is opened from disk at start-up, before the
partition that wraps it exists. This façade is where remote (tiered) segments
will be added. Reads return :class:`~odradek.storage.slices.FileSlice` s for
``sendfile``; see :mod:`odradek.storage.flush` for fsync.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from bisect import bisect_right
from collections.abc import Sequence

from odradek.common.clock import Clock
from odradek.storage import retention, timestamps
from odradek.storage.append import (
    AppendInfo,
    append_as_leader,
    append_replicated,
    empty_append,
)
from odradek.storage.batch_scan import BatchRow, BatchTable, scan_client, scan_replica
from odradek.storage.config import LogConfig, LogIo
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.errors import KafkaStorageError, OffsetOutOfRangeError, RecordListTooLargeError
from odradek.storage.flush import FlushJob
from odradek.storage.fs import FileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.listener import LogListener
from odradek.storage.loader import LoadReport, open_dir, settled
from odradek.storage.local_log import LocalLog
from odradek.storage.segment import Segment
from odradek.storage.slices import FileSlice
from odradek.storage.summary import KnownDir
from odradek.storage.swap import swap_cleaned
from odradek.storage.timestamps import RecordTimestampSearch, TimestampOffset
from odradek.storage.txnfiles import AbortedEntry, TxnFiles
from odradek.storage.writes import AppendJob, WriteSink
from odradek.wire.primitives import Buffer, DecodeError

_log = logging.getLogger("odradek.storage")

__all__ = ["AppendInfo", "FileSlice", "Log", "LogIo", "LogListener"]


class Log:
    """One partition's log. Not thread safe: use it from one thread (the event loop);
    only :meth:`FlushJob.run` and the write sink's jobs may run elsewhere."""

    __slots__ = ("_hw", "_log_start", "cleaner_checkpoint", "clock", "epochs", "fs",
                 "listener", "load_report", "local", "partition", "topic", "topic_id",
                 "txn_files")

    def __init__(self, fs: FileSystem, handles: HandleCache, clock: Clock, dir_path: str,
                 config: LogConfig, segments: list[Segment], *, log_start_offset: int,
                 recovery_point: int, high_watermark: int, topic_id: uuid.UUID | None,
                 load_report: LoadReport, io: LogIo | None = None,
                 known: KnownDir | None = None) -> None:
        self.local = LocalLog(fs, handles, clock, dir_path, config, segments,
                              recovery_point=recovery_point, owner=self, io=io or LogIo(),
                              damage=load_report.damage)
        self.topic, self.partition = self.local.topic, self.local.partition
        self.fs = fs
        self.clock = clock
        self.topic_id = topic_id
        self.load_report = settled(load_report)
        """What opening found (read-only: shared between logs when it found nothing)."""
        self._log_start = log_start_offset
        self._hw = high_watermark
        self.listener: LogListener | None = None
        """The partition layer (:meth:`attach`); None until one wraps the log."""
        self.epochs = LeaderEpochCache(fs, dir_path)
        """The leader-epoch cache; loaded here, rebuilt from the batches by the
        partition when its file was missing (``epochs.loaded`` is false)."""
        if known is not None:  # the clean-shutdown summary's copy of the file
            self.epochs.load_bytes(known.epochs)
        else:
            self.epochs.load()
        self.txn_files = TxnFiles(fs, dir_path)
        """``.txnindex`` files and producer snapshots (their contents are the
        partition layer's; see :mod:`odradek.storage.txnfiles`)."""
        self.cleaner_checkpoint = -1
        """First dirty offset for the cleaner (``cleaner-offset-checkpoint``)."""
        leo = self.local.log_end_offset
        try:
            if not load_report.clean:
                # (After a clean shutdown nothing lies past the log end.)
                self.txn_files.truncate_from_end(leo, self.local.segment_bases)
            # Epochs are noted when an append is assigned, before its write: a
            # crash in between leaves one starting past the log end.
            self.epochs.truncate_from_end(leo + 1)
        except OSError as e:
            _log.warning("%s: cannot trim transaction files: %s", dir_path, e)

    @classmethod
    def open(cls, fs: FileSystem, dir_path: str, config: LogConfig, clock: Clock, *,
             handles: HandleCache | None = None, clean_shutdown: bool = False,
             recovery_point: int = 0, log_start_offset: int = 0,
             high_watermark: int | None = None, topic_id: uuid.UUID | None = None,
             skip_damage: bool = False, io: LogIo | None = None,
             existing: bool = False, known: KnownDir | None = None) -> Log:
        """Open (creating if needed) the log in ``dir_path``, named ``<topic>-<partition>``.

        ``recovery_point``, ``log_start_offset`` and ``high_watermark`` come from the
        log directory's checkpoint files; ``clean_shutdown`` from its marker;
        ``skip_damage`` from ``log.recovery.damaged.batches`` (see ``loader.py``);
        ``existing``: ``dir_path`` was just listed (start-up), not looked for again.
        ``known``: the directory as its log directory's clean-shutdown summary has
        it (:mod:`odradek.storage.summary`), read instead of the directory.
        """
        handles = handles or HandleCache(fs, 64)
        opened = open_dir(fs, handles, dir_path, config, clock.now_ms(),
                          clean_shutdown=clean_shutdown, recovery_point=recovery_point,
                          log_start_offset=log_start_offset, high_watermark=high_watermark,
                          topic_id=topic_id, skip_damage=skip_damage, existing=existing,
                          known=known)
        log = cls(fs, handles, clock, dir_path, config, opened.segments,
                  log_start_offset=opened.log_start_offset,
                  recovery_point=opened.recovery_point, high_watermark=opened.high_watermark,
                  topic_id=opened.topic_id, load_report=opened.report, io=io, known=known)
        log.local.flushes.dir_dirty = opened.dir_changed
        log.txn_files.listing = opened.names
        return log

    def attach(self, listener: LogListener | None) -> None:
        """The partition that wraps this log (None: none any more, so no producer
        snapshot is stored at close)."""
        self.listener = listener

    # -- state ------------------------------------------------------------------------

    @property
    def dir_path(self) -> str:
        return self.local.dir_path

    @property
    def handles(self) -> HandleCache:
        return self.local.handles

    @property
    def config(self) -> LogConfig:
        return self.local.config

    @property
    def write_sink(self) -> WriteSink | None:
        """Where appends are written, off the loop (set by the broker once a partition
        wraps the log; :mod:`odradek.storage.writes`); None writes inline."""
        return self.local.queue.sink

    @write_sink.setter
    def write_sink(self, sink: WriteSink | None) -> None:
        self.local.queue.sink = sink

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The written end (fetches, followers and the HW see no further)."""
        return self.local.log_end_offset

    @property
    def next_offset(self) -> int:
        """The offset the next append gets (past the log end while writes are pending)."""
        return self.local.next_offset

    @property
    def writes_pending(self) -> bool:
        return bool(self.local.queue)

    @property
    def last_pending_write(self) -> AppendJob | None:
        """The newest job not yet completed: once it completes, so has every other."""
        return self.local.queue.last

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        """Every offset below this is durable (fsynced)."""
        return self.local.recovery_point

    @property
    def offline(self) -> bool:
        return self.local.offline

    @property
    def segments(self) -> Sequence[Segment]:
        return self.local.segments

    @property
    def segment_bases(self) -> Sequence[int]:
        return self.local.segment_bases

    @property
    def active_segment(self) -> Segment:
        return self.local.active_segment

    @property
    def size_bytes(self) -> int:
        return self.local.size_bytes

    @property
    def parent_dir(self) -> str:
        """The log directory (``log.dirs`` entry) holding this log."""
        return posixpath.dirname(self.local.dir_path)

    def relocate(self, dir_path: str, handles: HandleCache) -> None:
        """The partition directory was renamed ``dir_path`` (a future log becoming the
        current one): point every path there and open files through ``handles``
        from now on. No IO but closing the old handles."""
        self.txn_files.forget_listing()
        self.local.relocate(dir_path, handles)
        self.epochs.dir_path = dir_path
        self.txn_files.dir_path = dir_path

    def update_config(self, config: LogConfig) -> None:
        """New topic configuration; applies to the next append, roll and retention pass."""
        self.local.update_config(config)

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the HW up to ``offset`` (clamped to the LEO). Returns whether it moved."""
        new = min(offset, self.local.log_end_offset)
        if new <= self._hw:
            return False
        self._hw = new
        return True

    # -- what the local log tells -------------------------------------------------------

    def segment_rolled(self, next_offset: int) -> None:
        self._store_snapshot(next_offset, durable=False)

    def writes_rolled_back(self, written: int) -> None:
        self.epochs.truncate_from_end(written)
        self.txn_files.truncate_from_end(written, self.local.segment_bases)
        if self.listener is not None:
            self.listener.writes_rolled_back()

    def _store_snapshot(self, offset: int, *, durable: bool) -> None:
        """The producer snapshot at ``offset`` (a roll: not synced; close: synced). A
        snapshot that cannot be written only costs a longer scan at start-up."""
        if self.listener is None:
            return
        try:
            self.txn_files.write_snapshot(offset, self.listener.producer_snapshot(),
                                          durable=durable)
        except OSError as e:
            _log.warning("%s: producer snapshot not written: %s", self.dir_path, e)

    # -- append -----------------------------------------------------------------------

    def check(self, records: Buffer, *, allow_control: bool = False,
              require_keys: bool = False) -> BatchTable:
        """Every check a client's records field must pass before anything else looks
        at it (its size against ``segment.bytes``, then the batch scan: framing,
        magic, CRC, counts, timestamps, keys on compacted topics; see
        :func:`odradek.storage.batch_scan.scan_client`), and the table later
        stages read. Raises a StorageError with Kafka's code."""
        view = memoryview(records)
        size = len(view)
        config = self.local.config
        if size > config.segment_bytes:
            raise RecordListTooLargeError(
                f"{size} bytes of records exceed segment.bytes {config.segment_bytes}")
        return scan_client(view, config, self.clock.now_ms(), allow_control=allow_control,
                           require_keys=require_keys)

    def append(
        self, records: Buffer, *, leader_epoch: int = -1, checked: BatchTable | None = None
    ) -> AppendInfo:
        """Append a produce request's records field (one or more batches) as the leader:
        offsets from the next offset, ``leader_epoch`` (>= 0) in each batch. All or
        nothing. ``checked`` is :meth:`check`'s answer for these very bytes, when
        the caller already ran it. See :func:`odradek.storage.append.append_as_leader`."""
        self.local.check_online()
        view = memoryview(records)
        if len(view) == 0:
            return empty_append(self._log_start)
        if checked is None:
            checked = self.check(view)
        return append_as_leader(self.local, self.epochs, view, checked, leader_epoch,
                                self.clock.now_ms(), self._log_start)

    def append_replicated(self, records: Buffer,
                          rows: Sequence[BatchRow] | None = None) -> AppendInfo:
        """Append batches that already carry their offsets (a follower, or a Raft log);
        ``rows`` are their scan (:func:`~odradek.storage.batch_scan.scan_replica`),
        when the caller made it. See :func:`odradek.storage.append.append_replicated`."""
        self.local.check_online()
        view = memoryview(records)
        if len(view) == 0:
            return empty_append(self._log_start)
        if rows is None:
            rows = scan_replica(view).rows
        return append_replicated(self.local, self.epochs, view, rows, self.clock.now_ms(),
                                 self._log_start)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """A leader's new epoch starts at ``start_offset``: noted before its first
        append, so a follower asking for the epoch's end finds it; written to the
        checkpoint by that append (:meth:`LeaderEpochCache.note`)."""
        self.epochs.note(epoch, start_offset)

    def drain_writes(self) -> None:
        """Wait (blocking this thread) for every pending write (see
        :meth:`LocalLog.drain_writes`)."""
        self.local.drain_writes()

    def roll(self) -> Segment:
        """Start a new active segment at the next offset (no-op if the active one is
        empty)."""
        return self.local.roll()

    def append_aborted(self, entry: AbortedEntry) -> None:
        """Record an aborted transaction in the ``.txnindex`` of the segment holding
        its marker."""
        bases = self.local.segment_bases
        i = max(bisect_right(bases, entry.last_offset) - 1, 0)
        try:
            self.txn_files.append_aborted(bases[i], entry)
        except OSError as e:
            _log.warning("%s: .txnindex entry not written: %s", self.dir_path, e)

    # -- reads --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> list[FileSlice]:
        """Byte ranges holding the batches from the one containing ``offset`` on.

        Whole batches only, none with an offset at or past ``max_offset`` (the HW for
        consumers; default the LEO), at most ``max_bytes`` in total except that the
        first batch is returned whole even if larger when ``min_one_batch`` (KIP-74).
        Raises OffsetOutOfRangeError unless log_start <= offset <= LEO.
        """
        local = self.local
        local.check_online()
        leo = local.log_end_offset
        if offset < self._log_start or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start}, {leo}] of {self.dir_path}")
        return local.read(offset, max_bytes, leo if max_offset is None else max_offset,
                          min_one_batch)

    def note_damage(self, path: str, offset: int, error: Exception) -> None:
        """Record damage found while serving or scanning ``path`` (left in place)."""
        self.local.note_damage(path, offset, error)

    def read_bytes(self, slices: Sequence[FileSlice]) -> bytes:
        """The bytes of ``slices`` (what ``sendfile`` would send), concatenated."""
        try:
            return b"".join(s.read_bytes() for s in slices)
        except OSError as e:
            raise KafkaStorageError(f"read of {self.dir_path} failed: {e}") from e

    def read_records(self, offset: int, max_bytes: int, **kwargs: object) -> bytes:
        """:meth:`read` then :meth:`read_bytes`, for tests and the in-memory fs."""
        return self.read_bytes(self.read(offset, max_bytes, **kwargs))  # type: ignore[arg-type]

    # -- timestamps ---------------------------------------------------------------------

    def list_offsets(self, timestamp: int, *, max_offset: int | None = None,
                     record_search: RecordTimestampSearch | None = None) -> TimestampOffset:
        """ListOffsets for one partition: a timestamp >= 0 or one of Kafka's sentinels
        (see :mod:`odradek.storage.timestamps`). ``max_offset`` is the last fetchable
        offset (HW for consumers)."""
        self.local.check_online()
        leo = self.local.log_end_offset
        limit = leo if max_offset is None else min(max_offset, leo)
        try:
            return timestamps.list_offsets(self.local.segments, self._log_start, limit,
                                           timestamp, record_search)
        except (OSError, DecodeError) as e:
            raise KafkaStorageError(f"timestamp lookup in {self.dir_path} failed: {e}") from e

    # -- deletion and truncation --------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (<= HW). Returns the new log
        start (the low watermark). Segments wholly below it are deleted."""
        self.local.check_online()
        self.local.drain_writes()
        if offset > self._hw or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {self._hw}"
            )
        if offset > self._log_start:
            self._log_start = offset
            self.local.raise_recovery_point(offset)
            self.remove_segments(retention.segments_to_delete(self, 0, start_only=True))
            self._epochs_start_at(self._log_start)
        return self._log_start

    def delete_old_segments(self) -> int:
        """One retention pass (log start, ``retention.ms``, ``retention.bytes``).
        Returns how many segments were deleted."""
        self.local.check_online()
        victims = retention.segments_to_delete(self, self.clock.now_ms())
        self.remove_segments(victims)
        return len(victims)

    def remove_segments(self, victims: Sequence[Segment]) -> None:
        """Take the oldest ``victims`` out of the log and schedule their files' deletion."""
        if not victims:
            return
        self.txn_files.forget_listing()
        local = self.local
        local.remove_oldest(victims)
        first = local.segment_bases[0]
        self._log_start = max(self._log_start, first)
        local.raise_recovery_point(first)
        self._epochs_start_at(self._log_start)

    def replace_segments(self, old: Sequence[Segment], cleaned_path: str) -> bool:
        """Swap the cleaner's ``<base>.log.cleaned`` in for ``old`` (consecutive,
        inactive segments based at ``<base>``; :mod:`odradek.storage.swap`).
        False (and the cleaned file removed) when the log changed meanwhile."""
        self.local.check_online()
        self.txn_files.forget_listing()
        gone = swap_cleaned(self.local, self.txn_files, old, cleaned_path)
        if gone and self.listener is not None:
            self.listener.aborts_removed(gone)
        return gone is not None

    def _epochs_start_at(self, offset: int) -> None:
        try:
            self.epochs.truncate_from_start(offset)
        except OSError as e:
            raise self.local.io_failed("leader-epoch-checkpoint write", e) from e

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every batch with a last offset >= ``offset``
        (a batch containing ``offset`` goes whole, and the log then ends at its
        base; an ``offset`` in a gap becomes the log end itself, as in Kafka). HW
        and recovery point follow down. At or past the log end no batch goes, but
        leader epochs starting at or after ``offset`` still do: a leadership taken
        and lost without an append leaves an entry at the log end, and a follower
        that kept it would name that epoch in every fetch and be told to truncate
        again, forever."""
        local = self.local
        local.check_online()
        local.drain_writes()
        self.txn_files.forget_listing()
        if offset >= local.log_end_offset:
            try:
                self.epochs.truncate_from_end(offset)
            except OSError as e:
                raise local.io_failed("leader-epoch-checkpoint write", e) from e
            return
        if offset < local.segment_bases[0] or offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return
        self._after_truncate(local.truncate_to(offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (a replica far behind)."""
        local = self.local
        local.check_online()
        self.txn_files.forget_listing()
        local.truncate_fully_and_start_at(offset)
        try:
            self.epochs.clear()
        except OSError as e:
            raise local.io_failed("truncate", e) from e
        self._log_start = offset
        self._after_truncate(offset)
        self._hw = offset

    def _after_truncate(self, leo: int) -> None:
        try:
            self.epochs.truncate_from_end(leo)
            self.txn_files.truncate_from_end(leo, self.local.segment_bases)
        except OSError as e:
            raise self.local.io_failed("leader-epoch-checkpoint write", e) from e
        # A cut inside the batch holding the log start leaves nothing at or above it.
        self._log_start = min(self._log_start, leo)
        self._hw = min(self._hw, leo)

    # -- flush ----------------------------------------------------------------------------

    def flush_due(self) -> bool:
        """Is a flush wanted now? (``flush.messages`` / ``flush.ms`` reached, or a rolled
        segment not yet flushed.)"""
        return self.local.flush_due()

    def begin_flush(self) -> FlushJob | None:
        """Prepare a flush of everything appended so far (see :mod:`odradek.storage.flush`)."""
        return self.local.begin_flush()

    def flush(self) -> None:
        """Flush now on the calling thread (tests, shutdown), pending writes first."""
        self.local.flush()

    # -- close -----------------------------------------------------------------------------

    def close(self) -> None:
        """Write index tails (and final time-index entries) and close every file.
        Does not flush: call :meth:`flush` first for a clean shutdown. The producer
        snapshot at the log end is written (and synced) first, unless the log is
        untouched since a clean start (its active segment still deferred)."""
        self.local.drain_writes()
        if not self.local.offline and not self.local.active_segment.deferred:
            # (A log still deferred has had nothing appended or cut since the clean
            # shutdown that stored the snapshot at its end.)
            self._store_snapshot(self.local.next_offset, durable=True)
        self.local.close()

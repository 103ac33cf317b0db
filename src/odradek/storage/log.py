"""The partition log: an ordered list of segments and the offsets that bound it.

State and its invariants (checked by the property tests after every step)::

    log_start_offset <= high_watermark <= log_end_offset
    log_start_offset <= recovery_point <= log_end_offset   (after the first flush)
    segments sorted by base offset; only the last (active) one is appended to;
    each segment's batches are at or above its base offset and below the next
    segment's; offsets increase across batches and segments but need not be
    contiguous (compaction and skipped damage leave gaps; a leader's own appends
    are contiguous).

* ``log_end_offset`` (LEO): the offset the next appended record gets.
* ``high_watermark`` (HW): only the partition state machine
  (:mod:`odradek.replication.partition`) moves it, with
  :meth:`Log.advance_high_watermark`; it never moves back, except when a
  follower truncates its log below it (:meth:`Log.truncate_to`). Consumers
  read only below it; retention never deletes at or above it.
* ``log_start_offset``: the first offset readable; moved by retention and
  DeleteRecords (:meth:`Log.delete_records_before`), never back.
* ``recovery_point``: everything below it has been fsynced. Recovery after an
  unclean stop starts there.

Appends (:meth:`Log.append`) validate each batch header (framing, magic, CRC,
``lastOffsetDelta == recordsCount - 1``, timestamps), assign offsets by writing
``baseOffset`` into a copy of the 16-byte batch prefix, and write the bytes as
they came with one ``pwritev``; records are never decoded. Reads
(:meth:`Log.read`) return byte ranges of segment files covering whole batches,
for ``sendfile``. See :mod:`odradek.storage.flush` for fsync and
:mod:`odradek.storage.retention` for deletion. The log keeps its
leader-epoch cache (:mod:`odradek.storage.epochs`) in step with its segments:
an append in a new epoch adds an entry, truncation cuts entries.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import posixpath
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from odradek.common import crashpoints
from odradek.common.clock import Clock
from odradek.storage import retention, timestamps
from odradek.storage.append import (
    Checked,
    check_batch,
    check_client_batches,
    patch_create_time,
    patch_log_append_time,
)
from odradek.storage.checkpoint import (
    format_partition_metadata,
    parse_partition_metadata,
    write_atomically,
)
from odradek.storage.cleaner import CleanerView
from odradek.storage.config import INT_MAX, LogConfig
from odradek.storage.damage import Damage
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from odradek.storage.flush import FlushJob, FlushPolicy
from odradek.storage.fs import FileHandle, FileSystem, makedirs_durable
from odradek.storage.handles import HandleCache
from odradek.storage.loader import LoadReport, load_segments
from odradek.storage.names import (
    FUTURE_DIR_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA_FILE,
    SWAP_SUFFIX,
    parse_log_dir_name,
    segment_path,
)
from odradek.storage.pagecache import CacheWindow
from odradek.storage.segment import BatchMeta, Segment
from odradek.storage.timestamps import RecordTimestampSearch, TimestampOffset
from odradek.storage.txnfiles import AbortedEntry, TxnFiles
from odradek.storage.writes import AppendJob, WriteSink, WriteStream
from odradek.wire.primitives import Buffer, DecodeError

_log = logging.getLogger("odradek.storage")


class AppendInfo(NamedTuple):
    """What an append did (a NamedTuple: the append path builds one per request)."""

    first_offset: int
    """Offset of the first record appended; -1 when ``records`` held no batch."""
    last_offset: int
    log_append_time_ms: int
    """The broker time written into the batches for LogAppendTime topics, else -1."""
    max_timestamp: int
    records: int
    batches: int
    size_bytes: int
    log_start_offset: int
    flush_due: bool
    """A flush is due now (``flush.messages`` reached, or a segment was rolled), counting
    only what a flush in flight does not cover. With ``flush.messages`` set, Kafka
    acknowledges such an append only after the flush."""
    write: AppendJob | None = None
    """The pending write of these bytes (a write sink is set); None once written."""


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes at ``position`` of the segment file ``path`` (open as
    ``file``): whole batches, the first of which starts at ``first_offset``.
    The one slice type of storage and the network shell, which writes it with
    ``sendfile`` (:mod:`odradek.broker.net.transfer`)."""

    path: str
    position: int
    length: int
    first_offset: int
    file: FileHandle

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        data = self.file.pread(self.position, self.length)
        if len(data) != self.length:
            raise OSError(f"short read: {len(data)} of {self.length} bytes")
        return data

    def rest(self, skip: int) -> FileSlice:
        """The slice without its first ``skip`` bytes (what a partial send left)."""
        return FileSlice(self.path, self.position + skip, self.length - skip,
                         self.first_offset, self.file)


class Log:
    """One partition's log. Not thread safe: use it from one thread (the event loop);
    only :meth:`FlushJob.run` may run elsewhere."""

    def __init__(
        self,
        fs: FileSystem,
        handles: HandleCache,
        clock: Clock,
        dir_path: str,
        config: LogConfig,
        segments: list[Segment],
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        topic_id: uuid.UUID | None,
        load_report: LoadReport,
    ) -> None:
        parsed = parse_log_dir_name(posixpath.basename(dir_path))
        if parsed is None:
            raise ValueError(f"{dir_path} is not named <topic>-<partition>[.<id>-future]")
        self.topic, self.partition = parsed
        self.fs = fs
        self.handles = handles
        self.clock = clock
        self.dir_path = dir_path
        self.config = config
        self.topic_id = topic_id
        self.load_report = load_report
        self._policy = FlushPolicy(config.flush_messages, config.flush_ms)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset
        self._next = self._leo
        self._pending: deque[AppendJob] = deque()
        self._pending_messages = 0
        self._reserved = segments[-1].size
        self._generation = 0
        self.write_sink: WriteSink | None = None
        """Set by the broker: appends are written by the sink, off the loop
        (:mod:`odradek.storage.writes`); None writes inline."""
        self._stream = WriteStream(fs)
        self.allocate_ahead_bytes = 0
        """Set by the manager (``odradek.log.preallocate.bytes``): the most the active
        segment reserves on disk ahead of its appends (:meth:`Segment.allocate_for`);
        0 reserves nothing."""
        self.cache_window: CacheWindow | None = None
        """Set by the manager: the newest bytes this log keeps in the page cache
        (:mod:`odradek.storage.pagecache`); None leaves the cache to the kernel."""
        self._log_start = log_start_offset
        self._recovery_point = recovery_point
        self._hw = high_watermark
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self._flush_in_flight: FlushJob | None = None
        self._recovery_cap: int | None = None
        self._dir_dirty = False
        self._offline = False
        self.pending_deletes: list[tuple[int, list[str]]] = []
        self.rewrites = 0
        """Bumped whenever batches already in the log change in place (truncation, a
        cleaner swap): a copy taken from it meanwhile (a log moving to another log
        directory) must be taken again."""
        self.checkpoint_wanted = False
        """Set when a flush took the recovery point past a rolled segment: the log
        manager then writes the recovery-point checkpoint at its next tick."""
        self.epochs = LeaderEpochCache(fs, dir_path)
        """The leader-epoch cache; loaded here, rebuilt from the batches by the
        partition when its file was missing (``epochs.loaded`` is false)."""
        self.epochs.load()
        self.txn_files = TxnFiles(fs, dir_path)
        """``.txnindex`` files and producer snapshots (their contents are the
        partition layer's; see :mod:`odradek.storage.txnfiles`)."""
        self.cleaner_checkpoint = -1
        """First dirty offset for the cleaner (``cleaner-offset-checkpoint``)."""
        self.cleaner_view: Callable[[], CleanerView] | None = None
        """Set by the partition: the LSO and aborted transactions the cleaner obeys."""
        self.on_aborts_removed: Callable[[set[int]], None] | None = None
        """Set by the partition: the cleaner removed these ABORT markers (by offset),
        so their aborted-transaction entries go too."""
        self.snapshot_source: Callable[[], bytes] | None = None
        """Set by the partition: the producer snapshot to store at a roll and at close."""
        self.on_rollback: Callable[[], None] | None = None
        """Set by the partition: a failed write rolled the log back to its written
        end, so state kept for the appends it undid (producers) must be rebuilt."""
        try:
            self.txn_files.truncate_from_end(self._leo, self._bases)
            # Epochs are noted when an append is assigned, before its write: a
            # crash in between leaves one starting past the log end.
            self.epochs.truncate_from_end(self._leo + 1)
        except OSError as e:
            _log.warning("%s: cannot trim transaction files: %s", dir_path, e)
        self.damage: list[Damage] = list(load_report.damage)
        """Damage found by recovery (cut out) or while serving (left in place)."""
        for found in self.damage:
            _log.warning("%s", found.describe())

    # -- opening --------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        dir_path: str,
        config: LogConfig,
        clock: Clock,
        *,
        handles: HandleCache | None = None,
        clean_shutdown: bool = False,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        topic_id: uuid.UUID | None = None,
        skip_damage: bool = False,
    ) -> Log:
        """Open (creating if needed) the log in ``dir_path``, named ``<topic>-<partition>``.

        ``recovery_point``, ``log_start_offset`` and ``high_watermark`` come from the
        log directory's checkpoint files; ``clean_shutdown`` from its marker;
        ``skip_damage`` from ``log.recovery.damaged.batches`` (see ``loader.py``).
        """
        handles = handles or HandleCache(fs, 64)
        created = makedirs_durable(fs, dir_path)
        now = clock.now_ms()
        segments, report = load_segments(
            fs,
            handles,
            dir_path,
            config,
            now_ms=now,
            clean=clean_shutdown,
            recovery_point=recovery_point,
            skip_damage=skip_damage,
        )
        start = max(log_start_offset, segments[0].base_offset if segments else log_start_offset)
        if not segments or start > segments[-1].next_offset:
            # Nothing on disk, or everything below the checkpointed start is gone:
            # start empty at the log start so offsets never repeat.
            for seg in segments:
                seg.rename_deleted()
            for name in fs.listdir(dir_path):
                if name.endswith(".deleted"):
                    fs.remove(f"{dir_path}/{name}")
            segments = [cls._new_segment(fs, handles, dir_path, config, start, now)]
        leo = segments[-1].next_offset
        recovery = min(max(recovery_point, start), leo) if not created else leo
        if clean_shutdown:
            recovery = leo
        hw = min(max(high_watermark if high_watermark is not None else start, start), leo)
        topic_id = cls._partition_metadata(fs, dir_path, topic_id)
        log = cls(
            fs,
            handles,
            clock,
            dir_path,
            config,
            segments,
            log_start_offset=start,
            recovery_point=recovery,
            high_watermark=hw,
            topic_id=topic_id,
            load_report=report,
        )
        log._dir_dirty = True
        return log

    @staticmethod
    def _partition_metadata(
        fs: FileSystem, dir_path: str, topic_id: uuid.UUID | None
    ) -> uuid.UUID | None:
        path = posixpath.join(dir_path, PARTITION_METADATA_FILE)
        if fs.exists(path):
            try:
                stored = parse_partition_metadata(fs.read_file(path))
            except ValueError:
                stored = None
            if stored is not None and (topic_id is None or stored == topic_id):
                return stored
        if topic_id is not None:
            write_atomically(fs, path, format_partition_metadata(topic_id))
        return topic_id

    @staticmethod
    def _new_segment(
        fs: FileSystem,
        handles: HandleCache,
        dir_path: str,
        config: LogConfig,
        base: int,
        now_ms: int,
    ) -> Segment:
        return Segment.create(
            fs,
            handles,
            dir_path,
            base,
            max_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            now_ms=now_ms,
        )

    # -- state ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The written end: every offset below it is in the files. Fetches, followers
        and the HW see no further."""
        return self._leo

    @property
    def next_offset(self) -> int:
        """The offset the next append gets: the log end plus what pending writes
        hold (equal to it when none is pending)."""
        return self._next

    @property
    def writes_pending(self) -> bool:
        return bool(self._pending)

    @property
    def last_pending_write(self) -> AppendJob | None:
        """The newest job not yet completed: once it completes, so has every other."""
        return self._pending[-1] if self._pending else None

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        """Every offset below this is durable (fsynced)."""
        return self._recovery_point

    @property
    def offline(self) -> bool:
        return self._offline

    @property
    def segments(self) -> Sequence[Segment]:
        return tuple(self._segments)

    @property
    def is_future(self) -> bool:
        """A copy being filled for a move to another log directory (``-future``)."""
        return self.dir_path.endswith(FUTURE_DIR_SUFFIX)

    @property
    def parent_dir(self) -> str:
        """The log directory (``log.dirs`` entry) holding this log."""
        return posixpath.dirname(self.dir_path)

    def relocate(self, dir_path: str, handles: HandleCache) -> None:
        """The partition directory was renamed ``dir_path`` (a future log becoming the
        current one): point every path there and open files through ``handles``
        from now on. No IO but closing the old handles; no flush may be running
        and no write pending (a future log writes inline)."""
        assert self._flush_in_flight is None, "relocate during a flush"
        assert not self._pending, "relocate with writes pending"
        old = self.dir_path
        self.handles.discard_under(old)
        self.dir_path, self.handles = dir_path, handles
        for seg in self._segments:
            seg.relocate(dir_path, handles)
        self.epochs.path = posixpath.join(dir_path, LEADER_EPOCH_CHECKPOINT)
        self.txn_files.dir_path = dir_path
        self.pending_deletes = [
            (due, [posixpath.join(dir_path, posixpath.basename(p)) for p in paths])
            for due, paths in self.pending_deletes]
        self._dir_dirty = True

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        """New topic configuration; applies to the next append, roll and retention pass."""
        self.config = config
        self._policy = FlushPolicy(config.flush_messages, config.flush_ms)
        for seg in self._segments:
            seg.index_interval_bytes = config.index_interval_bytes

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the HW up to ``offset`` (clamped to the LEO). Returns whether it moved."""
        new = min(offset, self._leo)
        if new <= self._hw:
            return False
        self._hw = new
        return True

    def _check_online(self) -> None:
        if self._offline:
            raise KafkaStorageError(f"log {self.dir_path} is offline after an IO error")

    def _space_failed(self, what: str, error: OSError) -> KafkaStorageError | None:
        """For a full disk (ENOSPC, EDQUOT): the error to raise with the log staying
        online (reads go on; the next append tries again, which is how the
        directory is re-checked). None for any other error."""
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            return None
        return KafkaStorageError(f"{what} failed in {self.dir_path}: no space left on device")

    def _io_failed(self, what: str, error: OSError) -> KafkaStorageError:
        self._offline = True
        return KafkaStorageError(f"{what} failed in {self.dir_path}: {error}")

    # -- append -----------------------------------------------------------------------

    def check(self, records: Buffer, *, allow_control: bool = False) -> Checked:
        """Every check a client's records field must pass before anything else looks
        at it (sizes, framing, magic, CRC, counts, timestamps; see
        :mod:`odradek.storage.append`). Raises a StorageError with Kafka's code."""
        view = memoryview(records)
        size = len(view)
        if size > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{size} bytes of records exceed segment.bytes {self.config.segment_bytes}"
            )
        return check_client_batches(view, self.config, self.clock.now_ms(),
                                    allow_control=allow_control)

    def append(
        self, records: Buffer, *, leader_epoch: int = -1, checked: Checked | None = None
    ) -> AppendInfo:
        """Append a produce request's records field (one or more batches) as the leader.

        Offsets are assigned from the LEO; ``leader_epoch`` >= 0 is written into each
        batch's partitionLeaderEpoch. For LogAppendTime topics each batch gets the
        broker's time as max timestamp. All or nothing: one bad batch rejects all.
        ``checked`` is :meth:`check`'s answer for these very bytes, when the caller
        already ran it. Checks and byte handling: :mod:`odradek.storage.append`.
        """
        if self._offline:
            self._check_online()
        view = memoryview(records)
        size = len(view)
        config = self.config
        if size == 0:
            return self._empty_append()
        now = self.clock.now_ms()
        if checked is None:
            checked = self.check(view)
        first = self._next
        if config.log_append_time:
            chunks, metas = patch_log_append_time(view, checked, first, leader_epoch, now)
            append_time = max_ts = now
        else:
            chunks, metas = patch_create_time(view, checked, first, leader_epoch)
            append_time, max_ts = -1, checked.max_timestamp
        job = self._write(chunks, metas, size, max_ts, now, checked.records)
        if leader_epoch > self.epochs.latest_epoch:
            self._assign_epoch(leader_epoch, first)
        return self._appended(first, checked.records, len(metas), size, append_time, max_ts,
                              job)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        try:
            self.epochs.assign(epoch, start_offset)
        except OSError as e:
            raise self._io_failed("leader-epoch-checkpoint write", e) from e

    def append_replicated(self, records: Buffer) -> AppendInfo:
        """Append batches that already carry their offsets (a follower, or a Raft
        log). Offsets must increase from the LEO on (each batch at or above the
        end of the one before); gaps are allowed, as a compacted leader leaves
        them. Only framing and CRC are checked (not ``max.message.bytes``: the
        leader took the batch); timestamps and each batch's
        partitionLeaderEpoch are kept (and noted in the epoch cache)."""
        self._check_online()
        view = memoryview(records)
        if len(view) == 0:
            return self._empty_append()
        if len(view) > self.config.segment_bytes:
            raise RecordListTooLargeError(f"{len(view)} bytes exceed segment.bytes")
        metas: list[BatchMeta] = []
        expected = self._next
        max_ts = -1
        records_count = 0
        epochs: list[tuple[int, int]] = []
        first = -1
        pos = 0
        while pos < len(view):
            h = check_batch(view, pos)
            if h.base_offset < expected:
                raise CorruptRecordError(
                    f"replicated batch at offset {h.base_offset}, expected {expected} or later"
                )
            if first < 0:
                first = h.base_offset
            epochs.append((h.partition_leader_epoch, h.base_offset))
            metas.append((h.last_offset, h.max_timestamp, h.size))
            max_ts = max(max_ts, h.max_timestamp)
            records_count += h.records_count
            expected = h.next_offset
            pos += h.size
        job = self._write([view], metas, len(view), max_ts, self.clock.now_ms(), records_count)
        for epoch, base in epochs:
            if epoch > self.epochs.latest_epoch:
                self._assign_epoch(epoch, base)
        return self._appended(first, records_count, len(metas), len(view), -1, max_ts, job)

    def _empty_append(self) -> AppendInfo:
        return AppendInfo(-1, -1, -1, -1, 0, 0, 0, self._log_start, False)

    def _write(
        self,
        chunks: Sequence[Buffer],
        metas: Sequence[BatchMeta],
        size: int,
        max_ts: int,
        now: int,
        records: int,
    ) -> AppendJob | None:
        """Reserve the bytes' place and hand them to the write sink; without one,
        write them now. Returns the job while its write is pending, else None.
        Raises a StorageError when an inline write fails."""
        self._maybe_roll(size, max_ts, metas[-1][0], now)
        seg = self._segments[-1]
        if self.allocate_ahead_bytes > 0:
            seg.allocate_for(self._reserved + size, self.allocate_ahead_bytes,
                             self.config.segment_bytes)
        sink = self.write_sink
        job = AppendJob(self, self._stream, seg, self._reserved, chunks, metas, size,
                        self._next, metas[-1][0] + 1, records, self._generation,
                        handle=None if sink is not None else seg.log_handle())
        if job.position == 0:
            seg.note_rolling_timestamp(metas)
        self._reserved += size
        self._next = job.next_offset
        self._pending_messages += records
        self._pending.append(job)
        if sink is not None:
            sink.submit(job)
            return job
        error: OSError | None = None
        try:
            job.run()
        except OSError as e:
            error = e
        job.complete(error)
        if job.failure is not None:
            raise job.failure from error
        return None

    def complete_append(self, job: AppendJob, error: BaseException | None) -> None:
        """A job's write finished (see :mod:`odradek.storage.writes`): publish its
        batches, or fail it and roll back what was assigned after the written end.
        Jobs complete in the order they were made."""
        head = self._pending.popleft() if self._pending else None
        if head is not job:
            raise AssertionError(f"{self.dir_path}: append completed out of order")
        self._pending_messages -= job.records
        if job.generation != self._generation:
            job.failure = KafkaStorageError(
                f"append to {self.dir_path} failed: an earlier write failed")
            return
        if error is None:
            job.seg.note_appended(job.position, job.metas)
            self._leo = job.next_offset
            if self.cache_window is not None:
                self.cache_window.wrote(job.seg.log_path, job.position + job.size)
            if job.inactive_after:
                try:
                    job.seg.become_inactive()
                except OSError as e:
                    job.failure = self._io_failed("roll", e)
            return
        self._generation += 1
        full = (self._space_failed("append", error)
                if isinstance(error, OSError) and not job.cut_failed else None)
        if full is None:
            job.failure = self._io_failed("append", error if isinstance(error, OSError)
                                          else OSError(str(error)))
            return
        job.failure = full
        try:
            self._roll_back_to_written()
        except OSError as e:
            job.failure = self._io_failed("append", e)

    def _roll_back_to_written(self) -> None:
        """Forget what was assigned past the written end: segments rolled for it,
        epochs, aborted-transaction entries and snapshots noted for it, and the
        producer state recorded with it (the partition rebuilds that)."""
        written = self._leo
        victims = []
        while len(self._segments) > 1 and self._segments[-1].base_offset > written:
            victims.append(self._segments.pop())
            self._bases.pop()
        if victims:
            self._schedule_delete(victims)
        self._reserved = self._segments[-1].size
        self._next = written
        self._unflushed_messages = max(self._unflushed_messages, 1)
        self.epochs.truncate_from_end(written)
        self.txn_files.truncate_from_end(written, self._bases)
        if self.on_rollback is not None:
            self.on_rollback()

    def drain_writes(self) -> None:
        """Wait (blocking this thread) for every pending write, and complete them
        in order. Operations that change segments (truncation, a cleaner swap,
        deletion, close) call it first; the broker's paths to them wait for the
        writes without blocking first, so this is a safety net."""
        while self._pending:
            job = self._pending[0]
            job.wait_ran()
            job.complete(job.error)

    def _appended(
        self, first: int, records: int, batches: int, size: int, append_time: int, max_ts: int,
        job: AppendJob | None,
    ) -> AppendInfo:
        self._unflushed_messages += records
        return AppendInfo(
            first_offset=first,
            last_offset=self._next - 1,
            log_append_time_ms=append_time,
            max_timestamp=max_ts,
            records=records,
            batches=batches,
            size_bytes=size,
            log_start_offset=self._log_start,
            flush_due=self._append_waits_for_flush(),
            write=job,
        )

    def _append_waits_for_flush(self) -> bool:
        """Must the answer to this append wait for an fsync? As :meth:`flush_due`,
        but a flush in flight does not make it no: that flush does not cover this
        append, so the policy counts only what it does not cover, and the caller
        waits for it and then for the next one (group commit)."""
        if self._offline:
            return False
        if self._recovery_point < self._segments[-1].base_offset:
            return True
        in_flight = self._flush_in_flight
        return self._policy.due(
            unflushed_messages=self._unflushed_messages - (in_flight.messages if in_flight
                                                           else 0),
            last_flush_ms=self._last_flush_ms,
            now_ms=self.clock.monotonic_ms(),
        )

    # -- roll -------------------------------------------------------------------------

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now: int) -> None:
        seg = self._segments[-1]
        if self._reserved == 0:
            return
        cfg = self.config
        rolling = seg.rolling_timestamp()
        waited = max_ts - rolling if rolling >= 0 else now - seg.created_ms
        if (
            self._reserved > cfg.segment_bytes - size
            or waited > cfg.segment_ms
            or seg.offset_index().is_full
            or seg.time_index().is_full
            or last_offset - seg.base_offset > INT_MAX
        ):
            self.roll()

    def roll(self) -> Segment:
        """Start a new active segment at the LEO (no-op if the active one is empty)."""
        self._check_online()
        active = self._segments[-1]
        if self._reserved == 0:
            return active
        last = self._pending[-1] if self._pending else None
        if last is not None and last.seg is not active:
            last = None
        try:
            if last is None:
                active.become_inactive()
            seg = self._new_segment(
                self.fs, self.handles, self.dir_path, self.config, self._next, self.clock.now_ms()
            )
        except OSError as e:
            full = self._space_failed("roll", e)
            if full is not None:
                # Nothing was added to the segment list: the active segment stays
                # active and the roll is tried again by the next append.
                raise full from e
            raise self._io_failed("roll", e) from e
        if last is not None:
            last.inactive_after = True  # once its write is in
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._reserved = 0
        self._dir_dirty = True
        self._store_snapshot(durable=False)
        # The old segment's final index entries are not durable until the next flush,
        # so recovery must not trust it yet: cap the recovery point at its base.
        self._cap_recovery_point(active.base_offset)
        return seg

    def _store_snapshot(self, *, durable: bool) -> None:
        """The producer snapshot at the LEO (a roll: not synced; close: synced). A
        snapshot that cannot be written only costs a longer scan at start-up."""
        if self.snapshot_source is None:
            return
        try:
            self.txn_files.write_snapshot(self._next, self.snapshot_source(), durable=durable)
        except OSError as e:
            _log.warning("%s: producer snapshot not written: %s", self.dir_path, e)

    def append_aborted(self, entry: AbortedEntry) -> None:
        """Record an aborted transaction in the ``.txnindex`` of the segment holding
        its marker."""
        i = max(bisect_right(self._bases, entry.last_offset) - 1, 0)
        try:
            self.txn_files.append_aborted(self._bases[i], entry)
        except OSError as e:
            _log.warning("%s: .txnindex entry not written: %s", self.dir_path, e)

    @property
    def segment_bases(self) -> Sequence[int]:
        return self._bases

    def _cap_recovery_point(self, offset: int) -> None:
        self._recovery_point = min(self._recovery_point, offset)
        if self._flush_in_flight is not None:
            low = self._recovery_cap
            self._recovery_cap = offset if low is None else min(low, offset)

    # -- reads --------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> list[FileSlice]:
        """Byte ranges holding the batches from the one containing ``offset`` on.

        Whole batches only, none with an offset at or past ``max_offset`` (the HW for
        consumers; default the LEO), at most ``max_bytes`` in total except that the
        first batch is returned whole even if larger when ``min_one_batch`` (KIP-74).
        Raises OffsetOutOfRangeError unless log_start <= offset <= LEO.
        """
        self._check_online()
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start}, {self._leo}] of {self.dir_path}"
            )
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        out: list[FileSlice] = []
        budget = max_bytes
        i = max(bisect_right(self._bases, offset) - 1, 0)
        seg = self._segments[i]
        try:
            while offset < limit and i < len(self._segments):
                seg = self._segments[i]
                taken, more = self._read_segment(
                    seg, offset, limit, budget, min_one_batch and not out
                )
                if taken is not None:
                    out.append(taken)
                    budget -= taken.length
                if not more:
                    break
                i += 1
                if i < len(self._segments):
                    offset = self._segments[i].base_offset
        except DecodeError as e:
            self.note_damage(seg.log_path, offset, e)
            raise CorruptRecordError(f"{seg.log_path} is damaged near offset {offset}") from e
        except OSError as e:
            raise KafkaStorageError(f"read of {self.dir_path} failed: {e}") from e
        return out

    def note_damage(self, path: str, offset: int, error: Exception) -> None:
        """Record damage found while serving or scanning ``path`` (left in place), and
        log it once per file."""
        if any(d.path == path for d in self.damage):
            return
        text = str(error)
        position = -1
        if " at " in text:
            tail = text.rsplit(" at ", 1)[1]
            position = int(tail) if tail.isdigit() else -1
        found = Damage(path, position, 0, offset, None, "unread",
                       text.removeprefix(f"{path}: "))
        self.damage.append(found)
        _log.warning("%s", found.describe())

    def _read_segment(
        self, seg: Segment, offset: int, limit: int, budget: int, min_one: bool
    ) -> tuple[FileSlice | None, bool]:
        """(the slice of ``seg`` to return, whether to go on to the next segment)."""
        found = seg.find_batch(offset)
        if found is None:
            return None, True  # nothing at or after ``offset`` here: try the next one
        start, header = found
        if header.last_offset >= limit:
            return None, False
        end = seg.size
        if limit < seg.next_offset:
            stop = seg.find_batch(limit)
            end = stop[0] if stop is not None else seg.size
        file = self.handles.get(seg.log_path)
        if end - start <= budget:
            return (FileSlice(seg.log_path, start, end - start, header.base_offset, file),
                    end == seg.size)
        cut, first_size = seg.boundary_at_or_before(start, start + max(budget, 0))
        if cut == start and min_one:
            cut = start + first_size
        if cut == start:
            return None, False
        return FileSlice(seg.log_path, start, cut - start, header.base_offset, file), False

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

    def list_offsets(
        self,
        timestamp: int,
        *,
        max_offset: int | None = None,
        record_search: RecordTimestampSearch | None = None,
    ) -> TimestampOffset:
        """ListOffsets for one partition: a timestamp >= 0 or one of Kafka's sentinels
        (see :mod:`odradek.storage.timestamps`). ``max_offset`` is the last fetchable
        offset (HW for consumers)."""
        self._check_online()
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        try:
            return timestamps.list_offsets(
                self._segments, self._log_start, limit, timestamp, record_search
            )
        except (OSError, DecodeError) as e:
            raise KafkaStorageError(f"timestamp lookup in {self.dir_path} failed: {e}") from e

    def offset_for_timestamp(
        self,
        timestamp: int,
        *,
        max_offset: int | None = None,
        record_search: RecordTimestampSearch | None = None,
    ) -> TimestampOffset | None:
        """The first batch (at or after log start, below ``max_offset``) whose max
        timestamp is >= ``timestamp``; None if there is none."""
        if timestamp < 0:
            raise ValueError("use list_offsets for negative (sentinel) timestamps")
        result = self.list_offsets(timestamp, max_offset=max_offset, record_search=record_search)
        return None if result.offset < 0 else result

    # -- deletion and truncation --------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (<= HW). Returns the new log
        start (the low watermark). Segments wholly below it are deleted."""
        self._check_online()
        self.drain_writes()
        if offset > self._hw or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {self._hw}"
            )
        if offset > self._log_start:
            self._log_start = offset
            self._recovery_point = max(self._recovery_point, min(offset, self._leo))
            retention.delete_start_breached(self)
            self._epochs_start_at(self._log_start)
        return self._log_start

    def delete_old_segments(self) -> int:
        """One retention pass (log start, ``retention.ms``, ``retention.bytes``).
        Returns how many segments were deleted."""
        self._check_online()
        return retention.delete_old_segments(self, self.clock.now_ms())

    def take_due_deletes(self) -> tuple[list[str], int | None]:
        """The ``*.deleted`` paths due for removal (now the caller's to remove), and
        the monotonic time of the next pending removal, or None."""
        return retention.take_due_deletes(self, self.clock.monotonic_ms())

    def run_pending_deletes(self) -> int | None:
        """Remove ``*.deleted`` files whose ``file.delete.delay.ms`` has passed. Returns
        the monotonic time of the next pending removal, or None."""
        return retention.run_pending_deletes(self, self.clock.monotonic_ms())

    def remove_segments(self, victims: Sequence[Segment]) -> None:
        """Take the oldest ``victims`` out of the log and schedule their files' deletion."""
        if not victims:
            return
        self.drain_writes()
        n = len(victims)
        if victims[-1] is self._segments[-1]:
            self.roll()
        assert self._segments[:n] == list(victims)
        del self._segments[:n]
        del self._bases[:n]
        self._log_start = max(self._log_start, self._segments[0].base_offset)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)
        self._schedule_delete(victims)
        self._epochs_start_at(self._log_start)

    def replace_segments(self, old: Sequence[Segment], cleaned_path: str) -> bool:
        """Swap the cleaner's ``<base>.log.cleaned`` in for ``old`` (consecutive,
        inactive segments based at ``<base>``); see :mod:`odradek.storage.cleaner`
        for the protocol. False (and the cleaned file removed) when the log
        changed meanwhile (retention, truncation, deletion took a segment)."""
        self._check_online()
        self.drain_writes()
        n = len(old)
        try:
            i = next(k for k, seg in enumerate(self._segments) if seg is old[0])
        except StopIteration:
            i = -1
        if i < 0 or self._segments[i:i + n] != list(old) or i + n >= len(self._segments):
            with contextlib.suppress(OSError):
                self.fs.remove(cleaned_path)
            return False
        base = old[0].base_offset
        live = segment_path(self.dir_path, base, LOG_SUFFIX)
        swap = live + SWAP_SUFFIX
        self.rewrites += 1
        crashpoints.reach("cleaner.after_write")
        try:
            entries = self.txn_files.aborted([s.base_offset for s in old])
            self.fs.rename(cleaned_path, swap)
            self.fs.sync_dir(self.dir_path)  # the decision: recovery finishes it
            crashpoints.reach("cleaner.after_decide")
            self._schedule_delete(old)
            crashpoints.reach("cleaner.after_delete")
            self.fs.rename(swap, live)
            crashpoints.reach("cleaner.after_rename")
            seg = Segment(self.fs, self.handles, self.dir_path, base,
                          max_index_bytes=self.config.segment_index_bytes,
                          index_interval_bytes=self.config.index_interval_bytes,
                          size=self.fs.size(live), created_ms=old[0].created_ms)
            seg.rebuild_indexes()
            seg.next_offset = self._segments[i + n].base_offset
            kept_markers = {h.base_offset for _, h in seg.iter_headers(0) if h.is_control}
            gone = {e.last_offset for e in entries if e.last_offset not in kept_markers}
            for entry in entries:
                if entry.last_offset in kept_markers:
                    self.txn_files.append_aborted(base, entry)
            self.fs.sync_dir(self.dir_path)
        except (OSError, DecodeError) as e:
            error = e if isinstance(e, OSError) else OSError(str(e))
            raise self._io_failed("segment swap", error) from e
        self._segments[i:i + n] = [seg]
        self._bases[i:i + n] = [base]
        self._dir_dirty = True
        if gone and self.on_aborts_removed is not None:
            self.on_aborts_removed(gone)
        return True

    def _epochs_start_at(self, offset: int) -> None:
        try:
            self.epochs.truncate_from_start(offset)
        except OSError as e:
            raise self._io_failed("leader-epoch-checkpoint write", e) from e

    def _schedule_delete(self, victims: Sequence[Segment]) -> None:
        paths: list[str] = []
        try:
            for seg in victims:
                paths.extend(seg.rename_deleted())
        except OSError as e:
            raise self._io_failed("segment delete", e) from e
        self._dir_dirty = True
        due = self.clock.monotonic_ms() + self.config.file_delete_delay_ms
        self.pending_deletes.append((due, paths))
        if self.config.file_delete_delay_ms == 0:
            self.run_pending_deletes()

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every batch with a last offset >= ``offset``
        (a batch containing ``offset`` goes whole, and the log then ends at its
        base; an ``offset`` in a gap becomes the log end itself, as in Kafka). HW
        and recovery point follow down. At or past the log end no batch goes, but
        leader epochs starting at or after ``offset`` still do: a leadership taken
        and lost without an append leaves an entry at the log end, and a follower
        that kept it would name that epoch in every fetch and be told to truncate
        again, forever."""
        self._check_online()
        self.drain_writes()
        if offset >= self._leo:
            try:
                self.epochs.truncate_from_end(offset)
            except OSError as e:
                raise self._io_failed("leader-epoch-checkpoint write", e) from e
            return
        if offset < self._segments[0].base_offset or offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return
        self.rewrites += 1
        i = max(bisect_right(self._bases, offset) - 1, 0)
        try:
            seg = self._segments[i]
            found = seg.find_batch(offset)
            keep_until = min(found[1].base_offset, offset) if found is not None else offset
            victims = self._segments[i + 1 :]
            del self._segments[i + 1 :]
            del self._bases[i + 1 :]
            self._schedule_delete(victims)
            if found is not None:
                retention.truncate_segment(seg, found[0], found[1].base_offset)
            if seg.next_offset < keep_until:
                # ``offset`` is in a gap: the log ends there. An empty segment based
                # at it keeps that log end across a crash (recovery reads ends
                # from segments).
                seg.become_inactive()
                seg = self._new_segment(self.fs, self.handles, self.dir_path, self.config,
                                        keep_until, self.clock.now_ms())
                self._segments.append(seg)
                self._bases.append(keep_until)
            # Make the cut durable before anything is appended over it: otherwise a
            # crash could bring back stale batches right where new ones end.
            self.fs.fsync(seg.log_path)
            self.fs.sync_dir(self.dir_path)
        except (OSError, DecodeError) as e:
            raise self._io_failed("truncate", e if isinstance(e, OSError) else OSError(e)) from e
        self._after_truncate(seg.next_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (a replica far behind)."""
        self._check_online()
        self.drain_writes()
        self.rewrites += 1
        victims = list(self._segments)
        try:
            seg = (
                self._new_segment(
                    self.fs, self.handles, self.dir_path, self.config, offset, self.clock.now_ms()
                )
                if offset not in self._bases
                else None
            )
        except OSError as e:
            raise self._io_failed("truncate", e) from e
        self._segments = []
        self._bases = []
        self._schedule_delete(victims)
        if seg is None:
            seg = self._new_segment(
                self.fs, self.handles, self.dir_path, self.config, offset, self.clock.now_ms()
            )
        self._segments = [seg]
        self._bases = [offset]
        try:
            self.epochs.clear()
            self.fs.sync_dir(self.dir_path)
        except OSError as e:
            raise self._io_failed("truncate", e) from e
        self._log_start = offset
        self._after_truncate(offset)
        self._hw = offset
        self._recovery_point = offset

    def _after_truncate(self, leo: int) -> None:
        self._leo = self._next = leo
        self._reserved = self._segments[-1].size
        try:
            self.epochs.truncate_from_end(leo)
            self.txn_files.truncate_from_end(leo, self._bases)
        except OSError as e:
            raise self._io_failed("leader-epoch-checkpoint write", e) from e
        # A cut inside the batch holding the log start leaves nothing at or above it.
        self._log_start = min(self._log_start, leo)
        self._hw = min(self._hw, leo)
        self._cap_recovery_point(leo)
        self._unflushed_messages = max(self._unflushed_messages, 1)
        self._dir_dirty = True

    # -- flush ----------------------------------------------------------------------------

    def flush_due(self) -> bool:
        """Is a flush wanted now? (``flush.messages`` / ``flush.ms`` reached, or a rolled
        segment not yet flushed.)"""
        if self._offline or self._flush_in_flight is not None:
            return False
        if self._recovery_point < self._segments[-1].base_offset:
            return True
        return self._policy.due(
            unflushed_messages=self._unflushed_messages,
            last_flush_ms=self._last_flush_ms,
            now_ms=self.clock.monotonic_ms(),
        )

    def next_flush_deadline_ms(self) -> int | None:
        """Monotonic time at which a flush becomes due by ``flush.ms``, if one will."""
        if self._recovery_point < self._segments[-1].base_offset:
            return self.clock.monotonic_ms()
        return self._policy.deadline_ms(
            unflushed_messages=self._unflushed_messages, last_flush_ms=self._last_flush_ms
        )

    def begin_flush(self) -> FlushJob | None:
        """Prepare a flush of everything appended so far; None if one is already
        running or there is nothing to flush. Run ``job.run()`` on a thread, then
        ``job.complete(error)`` here."""
        self._check_online()
        if self._flush_in_flight is not None:
            return None
        if self._leo <= self._recovery_point and not self._dir_dirty:
            self._unflushed_messages = 0
            return None
        files: list[str] = []
        try:
            for seg in self._segments:
                if seg.dirty or seg.next_offset > self._recovery_point:
                    seg.write_indexes()
                    seg.dirty = False
                    files.extend(seg.paths)
        except OSError as e:
            full = self._space_failed("index write", e)
            if full is not None:
                raise full from e  # segments stay dirty: the next flush writes them
            raise self._io_failed("index write", e) from e
        dirs = [self.dir_path] if self._dir_dirty else []
        self._dir_dirty = False
        job = FlushJob(
            fs=self.fs,
            owner=self,
            up_to_offset=self._leo,
            files=files,
            dirs=dirs,
            messages=self._unflushed_messages - self._pending_messages,
            started_ms=self.clock.monotonic_ms(),
        )
        self._flush_in_flight = job
        self._recovery_cap = None
        return job

    def complete_flush(self, job: FlushJob, error: BaseException | None) -> None:
        if self._flush_in_flight is job:
            self._flush_in_flight = None
        if error is not None:
            self._offline = True
            self._dir_dirty = True
            return
        durable = job.up_to_offset
        if self._recovery_cap is not None:
            # Truncated or rolled while the job ran: what it synced may not cover it.
            durable = min(durable, self._recovery_cap)
            self._recovery_cap = None
        before = self._recovery_point
        self._recovery_point = min(max(self._recovery_point, durable), self._leo)
        if before < self._segments[-1].base_offset <= self._recovery_point:
            self.checkpoint_wanted = True
        self._unflushed_messages = max(self._unflushed_messages - job.messages, 0)
        self._last_flush_ms = job.started_ms

    def flush(self) -> None:
        """Flush now on the calling thread (tests, shutdown), pending writes first."""
        self.drain_writes()
        job = self.begin_flush()
        if job is None:
            return
        try:
            job.run()
        except OSError as e:
            job.complete(e)
            raise self._io_failed("fsync", e) from e
        job.complete(None)

    # -- close -----------------------------------------------------------------------------

    def close(self) -> None:
        """Write index tails (and final time-index entries) and close every file.
        Does not flush: call :meth:`flush` first for a clean shutdown. The producer
        snapshot at the log end is written (and synced) first."""
        self.drain_writes()
        if not self._offline:
            self._store_snapshot(durable=True)
        for seg in self._segments:
            try:
                seg.close()
            except OSError:
                self._offline = True
        self.handles.discard_under(self.dir_path)

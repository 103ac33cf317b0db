"""The local log: a partition's segment files on this broker's disk, as Kafka's ``LocalLog``.

:class:`LocalLog` owns the segment list and nothing above it: it appends bytes
at offsets already assigned, rolls, reads byte ranges, truncates, takes
segments out (renamed ``*.deleted``, removed after ``file.delete.delay.ms``)
and flushes. Offsets' meaning (log start, high watermark), the leader-epoch
cache, ``.txnindex`` files, producer snapshots and validation belong to the
:class:`~odradek.storage.log.Log` above it, which it tells of a roll and of a
rollback through :class:`LocalLogOwner`.

State and its invariants::

    segments sorted by base offset; only the last (active) one is appended to;
    bases[i] == segments[i].base_offset
    LEO (the written end) <= next (the next offset to assign);
    LEO == next when no write is pending (:class:`~odradek.storage.writes.WriteQueue`)
    reserved == the active segment's size plus the pending writes' bytes
    recovery_point <= LEO   (:class:`~odradek.storage.flush.FlushSchedule`)

Errors: an IO error takes the log offline (every later call raises
KAFKA_STORAGE_ERROR until a restart recovers it), except a full disk on an
append or a roll, which leaves it online so the next append tries again.
"""

from __future__ import annotations

import errno
import logging
import posixpath
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Protocol

from odradek.common.clock import Clock
from odradek.storage.config import LogConfig, LogIo
from odradek.storage.damage import Damage, unread_damage
from odradek.storage.deletes import DeleteQueue
from odradek.storage.errors import CorruptRecordError, KafkaStorageError, OffsetOutOfRangeError
from odradek.storage.flush import FlushJob, FlushSchedule, flush_policy
from odradek.storage.fs import FileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.names import FUTURE_DIR_SUFFIX, parse_log_dir_name
from odradek.storage.pagecache import CacheWindow
from odradek.storage.recovery import open_active_clean, recover_segment
from odradek.storage.segment import BatchMeta, Segment
from odradek.storage.segment_ops import cut_at_batch, should_roll
from odradek.storage.slices import FileSlice, read_slices
from odradek.storage.writes import AppendJob, WriteQueue
from odradek.wire.primitives import Buffer, DecodeError

_log = logging.getLogger("odradek.storage")


class LocalLogOwner(Protocol):
    """What the local log tells the log above it."""

    def segment_rolled(self, next_offset: int) -> None:
        """A new active segment starts at ``next_offset`` (store a producer snapshot)."""

    def writes_rolled_back(self, written: int) -> None:
        """A failed write took the log back to ``written``: state noted for the
        appends it undid (epochs, aborted transactions, producers) must go."""


class LocalLog:
    """One partition's segment files. Not thread safe: use it from the event loop;
    only :meth:`FlushJob.run` and :meth:`AppendJob.run` may run elsewhere."""

    __slots__ = ("_bases", "_leo", "_next", "_offline", "_owner", "_reserved", "_segments",
                 "cache_window", "clock", "config", "damage", "deletes", "dir_path", "flushes",
                 "fs", "handles", "io", "on_busy", "partition", "queue", "rewrites", "topic")

    def __init__(self, fs: FileSystem, handles: HandleCache, clock: Clock, dir_path: str,
                 config: LogConfig, segments: list[Segment], *, recovery_point: int,
                 owner: LocalLogOwner, io: LogIo, damage: Sequence[Damage] = ()) -> None:
        parsed = parse_log_dir_name(posixpath.basename(dir_path))
        if parsed is None:
            raise ValueError(f"{dir_path} is not named <topic>-<partition>[.<id>-future]")
        self.topic, self.partition = parsed
        self.fs = fs
        self.handles = handles
        self.clock = clock
        self.dir_path = dir_path
        self.config = config
        self.io = io
        self._owner = owner
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = self._next = segments[-1].next_offset
        self._reserved = segments[-1].size
        self.queue = WriteQueue(fs)
        self.flushes = FlushSchedule(recovery_point, clock.monotonic_ms(),
                                     flush_policy(config.flush_messages, config.flush_ms))
        self._offline = False
        self.deletes = DeleteQueue(fs)
        self.rewrites = 0
        """Bumped whenever batches already in the log change in place (truncation, a
        cleaner swap): a copy taken from it meanwhile (a log moving to another log
        directory) must be taken again."""
        self.damage: Sequence[Damage] = tuple(damage)
        """Damage found by recovery (cut out) or while serving (left in place); a
        tuple, replaced (not grown) when more is found (the empty one is shared)."""
        self.cache_window: CacheWindow | None = None
        """What this log wrote and keeps in the page cache: made at its first
        write from :attr:`LogIo.page_cache` (None before, or without one)."""
        self.on_busy: Callable[[], None] = _nothing
        """Called whenever the log may have housekeeping to do that it had not
        (unflushed appends, a roll, a truncation, files to delete, a flush done,
        a new flush policy): the log manager's tick then looks at it
        (:meth:`LogManager.tick` walks only those, not every log)."""
        for found in self.damage:
            _log.warning("%s", found.describe())

    # -- state ------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The written end: every offset below it is in the files."""
        return self._leo

    @property
    def next_offset(self) -> int:
        """The offset the next append gets: the log end plus what pending writes hold."""
        return self._next

    @property
    def recovery_point(self) -> int:
        return self.flushes.recovery_point

    @property
    def offline(self) -> bool:
        return self._offline

    @property
    def segments(self) -> Sequence[Segment]:
        return tuple(self._segments)

    @property
    def segment_bases(self) -> Sequence[int]:
        return self._bases

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def is_future(self) -> bool:
        """A copy being filled for a move to another log directory (``-future``)."""
        return self.dir_path.endswith(FUTURE_DIR_SUFFIX)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.flushes.policy = flush_policy(config.flush_messages, config.flush_ms)
        self.on_busy()
        for seg in self._segments:
            seg.index_interval_bytes = config.index_interval_bytes

    def relocate(self, dir_path: str, handles: HandleCache) -> None:
        """The partition directory was renamed ``dir_path``: point every segment there
        and open files through ``handles``. No flush may run and no write be
        pending (a future log writes inline)."""
        assert self.flushes.in_flight is None, "relocate during a flush"
        assert not self.queue, "relocate with writes pending"
        self.handles.discard_under(self.dir_path)
        self.dir_path, self.handles = dir_path, handles
        for seg in self._segments:
            seg.relocate(dir_path, handles)
        self.deletes.relocate(dir_path)
        self.flushes.dir_dirty = True

    def check_online(self) -> None:
        if self._offline:
            raise KafkaStorageError(f"log {self.dir_path} is offline after an IO error")

    def space_failed(self, what: str, error: OSError) -> KafkaStorageError | None:
        """For a full disk (ENOSPC, EDQUOT): the error to raise with the log staying
        online. None for any other error."""
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            return None
        return KafkaStorageError(f"{what} failed in {self.dir_path}: no space left on device")

    def io_failed(self, what: str, error: OSError) -> KafkaStorageError:
        """Take the log offline; the error to raise."""
        self._offline = True
        return KafkaStorageError(f"{what} failed in {self.dir_path}: {error}")

    def new_segment(self, base: int) -> Segment:
        return Segment.create(self.fs, self.handles, self.dir_path, base,
                              max_index_bytes=self.config.segment_index_bytes,
                              index_interval_bytes=self.config.index_interval_bytes,
                              now_ms=self.clock.now_ms())

    def load_active(self) -> None:
        """Read a deferred active segment (:attr:`Segment.deferred`: opened after a
        clean shutdown without reading it) as start-up would have: its indexes,
        checked, and the bytes after the last offset-index entry, or, if they
        disagree, a validation of the whole segment that cuts a bad tail. Called
        before the first append, roll or truncation; no write is pending then.

        Should the files end elsewhere than the checkpointed end the log served
        until now (files changed behind a clean shutdown), the log goes offline
        before anything is written: the next start, unclean, recovers it."""
        seg = self._segments[-1]
        trusted = seg.next_offset
        try:
            if not open_active_clean(seg):
                result = recover_segment(seg, None)
                if result.damage:
                    self.damage = (*self.damage, *result.damage)
        except (OSError, DecodeError) as e:
            raise self.io_failed("segment load", e if isinstance(e, OSError) else OSError(e)) from e
        seg.deferred = False
        self._reserved = seg.size
        if seg.next_offset != trusted:
            raise self.io_failed("segment load", OSError(
                f"the files end at offset {seg.next_offset}, not at the checkpointed "
                f"{trusted}"))

    # -- append -----------------------------------------------------------------------

    def write(self, chunks: Sequence[Buffer], metas: Sequence[BatchMeta], size: int,
              max_ts: int, now: int, records: int) -> AppendJob | None:
        """Append ``chunks`` (``size`` bytes of whole batches, offsets assigned from
        :attr:`next_offset`, described by ``metas``): roll if due, reserve their
        place and queue the write. Returns the job while its write is pending,
        else None. Raises a StorageError when an inline write fails."""
        if self._segments[-1].deferred:
            self.load_active()
        if should_roll(self._segments[-1], self.config, self._reserved, size, max_ts,
                       metas[-1][0], now):
            self.roll()
        seg = self._segments[-1]
        if self.io.allocate_ahead_bytes > 0:
            seg.allocate_for(self._reserved + size, self.io.allocate_ahead_bytes,
                             self.config.segment_bytes)
        queue = self.queue
        job = AppendJob(self, queue.stream, seg, self._reserved, chunks, metas, size,
                        self._next, metas[-1][0] + 1, records, queue.generation,
                        handle=None if queue.sink is not None else seg.log_handle())
        if job.position == 0:
            seg.note_rolling_timestamp(metas)
        self._reserved += size
        self._next = job.next_offset
        self.flushes.unflushed_messages += records
        self.on_busy()
        return queue.submit(job)

    def complete_append(self, job: AppendJob, error: BaseException | None) -> None:
        """A job's write finished (see :mod:`odradek.storage.writes`): publish its
        batches, or fail it and roll back what was assigned after the written end."""
        if not self.queue.take(job, self.dir_path):
            job.failure = KafkaStorageError(
                f"append to {self.dir_path} failed: an earlier write failed")
            return
        if error is None:
            job.seg.note_appended(job.position, job.metas)
            self._leo = job.next_offset
            window = self.cache_window
            if window is None and self.io.page_cache is not None:
                window = self.cache_window = self.io.page_cache.window_for()
            if window is not None:
                window.wrote(job.seg.log_path, job.position + job.size)
            if job.inactive_after:
                try:
                    job.seg.become_inactive()
                except OSError as e:
                    job.failure = self.io_failed("roll", e)
            return
        self.queue.generation += 1
        full = (self.space_failed("append", error)
                if isinstance(error, OSError) and not job.cut_failed else None)
        if full is None:
            job.failure = self.io_failed("append", error if isinstance(error, OSError)
                                         else OSError(str(error)))
            return
        job.failure = full
        try:
            self._roll_back_to_written()
        except OSError as e:
            job.failure = self.io_failed("append", e)

    def _roll_back_to_written(self) -> None:
        """Forget what was assigned past the written end: segments rolled for it, and
        (the owner's) what was noted for it."""
        written = self._leo
        victims = []
        while len(self._segments) > 1 and self._segments[-1].base_offset > written:
            victims.append(self._segments.pop())
            self._bases.pop()
        if victims:
            self.schedule_delete(victims)
        self._reserved = self._segments[-1].size
        self._next = written
        self.flushes.unflushed_messages = max(self.flushes.unflushed_messages, 1)
        self.on_busy()
        self._owner.writes_rolled_back(written)

    def drain_writes(self) -> None:
        """Wait (blocking this thread) for every pending write, completing them in
        order. Operations that change segments call it first; the broker's paths
        to them wait for the writes without blocking first, so this is a safety net."""
        self.queue.drain()

    def append_waits_for_flush(self) -> bool:
        """Must the answer to the append just made wait for an fsync?"""
        if self._offline:
            return False
        return self.flushes.append_waits(self._segments[-1].base_offset,
                                         self.clock.monotonic_ms())

    # -- roll -------------------------------------------------------------------------

    def roll(self) -> Segment:
        """Start a new active segment at the next offset (no-op if the active one is
        empty)."""
        self.check_online()
        if self._segments[-1].deferred:
            self.load_active()
        active = self._segments[-1]
        if self._reserved == 0:
            return active
        last = self.queue.last
        if last is not None and last.seg is not active:
            last = None
        try:
            if last is None:
                active.become_inactive()
            seg = self.new_segment(self._next)
        except OSError as e:
            full = self.space_failed("roll", e)
            if full is not None:
                # Nothing was added to the segment list: the active segment stays
                # active and the roll is tried again by the next append.
                raise full from e
            raise self.io_failed("roll", e) from e
        if last is not None:
            last.inactive_after = True  # once its write is in
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._reserved = 0
        self.flushes.dir_dirty = True
        self._owner.segment_rolled(self._next)
        # The old segment's final index entries are not durable until the next flush,
        # so recovery must not trust it yet: cap the recovery point at its base.
        self.flushes.cap(active.base_offset)
        self.on_busy()
        return seg

    # -- reads --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, limit: int,
             min_one_batch: bool) -> list[FileSlice]:
        """Byte ranges holding whole batches from the one containing ``offset`` on,
        none with an offset at or past ``limit``, at most ``max_bytes`` except
        that the first batch is whole when ``min_one_batch`` (KIP-74)."""
        self.check_online()
        if offset > self._leo:
            raise OffsetOutOfRangeError(f"offset {offset} is past the end {self._leo} "
                                        f"of {self.dir_path}")
        try:
            return read_slices(self._segments, self._bases, self.handles, offset,
                               min(limit, self._leo), max_bytes, min_one_batch, self._damaged)
        except OSError as e:
            raise KafkaStorageError(f"read of {self.dir_path} failed: {e}") from e

    def _damaged(self, path: str, offset: int, error: DecodeError) -> CorruptRecordError:
        """A read met damage in ``path`` near ``offset``: note it; the error to raise."""
        self.note_damage(path, offset, error)
        return CorruptRecordError(f"{path} is damaged near offset {offset}")

    def note_damage(self, path: str, offset: int, error: Exception) -> None:
        """Record damage found while serving or scanning ``path`` (left in place), and
        log it once per file."""
        if any(d.path == path for d in self.damage):
            return
        found = unread_damage(path, offset, error)
        self.damage = (*self.damage, found)
        _log.warning("%s", found.describe())

    # -- taking segments out ------------------------------------------------------------

    def remove_oldest(self, victims: Sequence[Segment]) -> None:
        """Take the oldest ``victims`` out (rolling first if the active one is among
        them) and schedule their files' deletion."""
        self.drain_writes()
        n = len(victims)
        if victims[-1] is self._segments[-1]:
            self.roll()
        assert self._segments[:n] == list(victims)
        del self._segments[:n]
        del self._bases[:n]
        self.schedule_delete(victims)

    def swap(self, i: int, n: int, seg: Segment) -> None:
        """Segments ``i`` to ``i + n`` are now ``seg`` (a cleaner swap, files done)."""
        self._segments[i:i + n] = [seg]
        self._bases[i:i + n] = [seg.base_offset]
        self.flushes.dir_dirty = True

    def schedule_delete(self, victims: Sequence[Segment]) -> None:
        """Rename ``victims``' files ``*.deleted``, to be removed after
        ``file.delete.delay.ms`` (:class:`~odradek.storage.deletes.DeleteQueue`)."""
        paths: list[str] = []
        try:
            for seg in victims:
                paths.extend(seg.rename_deleted())
        except OSError as e:
            raise self.io_failed("segment delete", e) from e
        self.flushes.dir_dirty = True
        now = self.clock.monotonic_ms()
        self.deletes.add(paths, now + self.config.file_delete_delay_ms)
        self.on_busy()
        if self.config.file_delete_delay_ms == 0:
            self.deletes.run_due(now)

    # -- truncation ----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch with a last offset >= ``offset`` (a batch containing it
        goes whole; an ``offset`` in a gap becomes the log end itself), durably,
        before anything is appended over the cut. ``offset`` is below the log end
        and at or above the first segment's base. Returns the new log end."""
        self.drain_writes()
        if self._segments[-1].deferred:
            self.load_active()
        self.rewrites += 1
        i = max(bisect_right(self._bases, offset) - 1, 0)
        try:
            seg = self._segments[i]
            found = seg.find_batch(offset)
            keep_until = min(found[1].base_offset, offset) if found is not None else offset
            victims = self._segments[i + 1:]
            del self._segments[i + 1:]
            del self._bases[i + 1:]
            self.schedule_delete(victims)
            if found is not None:
                cut_at_batch(seg, found[0], found[1].base_offset)
            if seg.next_offset < keep_until:
                # ``offset`` is in a gap: the log ends there. An empty segment based
                # at it keeps that log end across a crash (recovery reads ends
                # from segments).
                seg.become_inactive()
                seg = self.new_segment(keep_until)
                self._segments.append(seg)
                self._bases.append(keep_until)
            # Make the cut durable before anything is appended over it: otherwise a
            # crash could bring back stale batches right where new ones end.
            self.fs.fsync(seg.log_path)
            self.fs.sync_dir(self.dir_path)
        except (OSError, DecodeError) as e:
            raise self.io_failed("truncate", e if isinstance(e, OSError) else OSError(e)) from e
        self._truncated(seg.next_offset)
        return seg.next_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset``."""
        self.drain_writes()
        self.rewrites += 1
        victims = list(self._segments)
        try:
            seg = self.new_segment(offset) if offset not in self._bases else None
        except OSError as e:
            raise self.io_failed("truncate", e) from e
        self._segments, self._bases = [], []
        self.schedule_delete(victims)
        if seg is None:
            seg = self.new_segment(offset)
        self._segments, self._bases = [seg], [offset]
        try:
            self.fs.sync_dir(self.dir_path)
        except OSError as e:
            raise self.io_failed("truncate", e) from e
        self._truncated(offset)
        self.flushes.recovery_point = offset

    def _truncated(self, leo: int) -> None:
        self._leo = self._next = leo
        self._reserved = self._segments[-1].size
        self.flushes.cap(leo)
        self.flushes.unflushed_messages = max(self.flushes.unflushed_messages, 1)
        self.flushes.dir_dirty = True
        self.on_busy()

    def raise_recovery_point(self, offset: int) -> None:
        """Offsets below ``offset`` are gone (DeleteRecords, retention): nothing there
        needs recovering."""
        self.flushes.recovery_point = max(self.flushes.recovery_point,
                                          min(offset, self._leo))

    # -- flush ----------------------------------------------------------------------------

    def housekeeping_idle(self) -> bool:
        """Whether the log manager's tick has nothing to do here until
        :attr:`on_busy` is called: no files waiting for deletion, no checkpoint
        wanted, no flush due now or at a later deadline."""
        return (not self.deletes.pending and not self.flushes.checkpoint_wanted
                and not self.flush_due() and self.next_flush_deadline_ms() is None)

    def flush_due(self) -> bool:
        if self._offline:
            return False
        return self.flushes.due(self._segments[-1].base_offset, self.clock.monotonic_ms())

    def next_flush_deadline_ms(self) -> int | None:
        return self.flushes.deadline_ms(self._segments[-1].base_offset,
                                        self.clock.monotonic_ms())

    def begin_flush(self) -> FlushJob | None:
        """Prepare a flush of everything written so far; None if one is running or
        there is nothing to flush. Run ``job.run()`` on a thread, then
        ``job.complete(error)`` here."""
        self.check_online()
        try:
            return self.flushes.prepare(
                self.fs, self, self._segments, log_end=self._leo, dir_path=self.dir_path,
                pending_messages=self.queue.messages, clock=self.clock,
                partition=(self.topic, self.partition))
        except OSError as e:
            full = self.space_failed("index write", e)
            if full is not None:
                raise full from e  # segments stay dirty: the next flush writes them
            raise self.io_failed("index write", e) from e

    def complete_flush(self, job: FlushJob, error: BaseException | None) -> None:
        self.on_busy()
        if error is not None:
            self._offline = True
            self.flushes.failed(job)
            return
        self.flushes.completed(job, self._leo, self._segments[-1].base_offset)

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
            raise self.io_failed("fsync", e) from e
        job.complete(None)

    def close(self) -> None:
        """Write index tails and close every file (no flush: call :meth:`flush` first)."""
        self.drain_writes()
        for seg in self._segments:
            try:
                seg.close()
            except OSError:
                self._offline = True
        self.handles.discard_under(self.dir_path)


def _nothing() -> None:
    """:attr:`LocalLog.on_busy` of a log no manager ticks (a future log, a tool's)."""

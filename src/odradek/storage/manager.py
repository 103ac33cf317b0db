"""All partition logs of the log directories (``log.dirs``), their checkpoints and
housekeeping.

Layout of each log directory (several: :mod:`odradek.storage.logdirs` says
where each partition goes and how a partition moves between them)::

    .kafka_cleanshutdown               present only between a clean close and the next start
    recovery-point-offset-checkpoint   per partition: offsets below are fsynced
    log-start-offset-checkpoint        per partition: the log start offset
    replication-offset-checkpoint      per partition: the high watermark
    cleaner-offset-checkpoint          per partition: the cleaner's first dirty offset
    <topic>-<partition>/               one directory per partition log (see log.py)
    <topic>-<partition>.<hex>-future/  a partition being moved into this directory
    <topic>-<partition>.<hex>-delete/  a deleted partition, removed after file.delete.delay.ms

Each directory's checkpoints list the logs in that directory, future logs
included (a partition's current and future logs are never in the same one);
:mod:`odradek.storage.dir_checkpoints` reads them, says what goes in them and
when each is written. :mod:`odradek.storage.future_logs` has the file steps of
a move between directories.

Start-up (:meth:`LogManager.startup`) reads each directory's checkpoints,
removes its clean-shutdown marker (and syncs that removal) before touching any
log, so a crash during start-up is never mistaken for a clean stop, then opens
every partition directory: trusting the files after a clean shutdown,
recovering from each log's recovery point otherwise.

The broker drives the rest without blocking its loop: :meth:`LogManager.tick`
runs cheap housekeeping in place (retention passes, delayed file removal) and
returns the fsync work (:class:`~odradek.storage.flush.FlushJob`, checkpoint
writes) as jobs for an executor, plus the monotonic time at which to call it
again. Files are opened through one shared, capped handle cache. Future logs
are left out of housekeeping: the mover filling one (the broker's
``log_mover``) flushes it, on a worker thread, through its own handle cache.

Not built: a failed directory taking only its partitions offline (a
checkpoint write failing anywhere marks the whole manager failed, and an IO
error takes the one log offline).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from odradek.common.clock import Clock
from odradek.common.ids import Ids, RandomIds
from odradek.storage.batchsync import dirty_bytes
from odradek.storage.checkpoint import TopicPartition, clean_shutdown_path, write_clean_shutdown
from odradek.storage.cleaner import CleanerPool, CleanJob, plan_pass
from odradek.storage.cleaner_policy import dirtiest_log
from odradek.storage.config import CleanerSettings, LogConfig, LogManagerConfig
from odradek.storage.deletes import DeletedDirs, RemoveDeletedJob
from odradek.storage.dir_checkpoints import (
    CheckpointJob,
    CheckpointSchedule,
    checkpoint_contents,
    checkpoint_files,
    read_dir_checkpoints,
)
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.errors import KafkaStorageError
from odradek.storage.flush import IoJob
from odradek.storage.fs import FileSystem, OsFileSystem, makedirs_durable
from odradek.storage.future_logs import FUTURE_HANDLES, open_future_log, swap_in_future
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log, LogIo
from odradek.storage.logdirs import choose_dir, scan
from odradek.storage.mempressure import NO_READING, MemoryReader, PressureGauge, read_proc
from odradek.storage.names import (
    CLEANER_OFFSET_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    deleted_dir_name,
    partition_dir_name,
    stray_dir_name,
)
from odradek.storage.pagecache import PageCacheTrimmer, default_retain
from odradek.storage.prepare import (
    MIN_BATCH,
    place,
    prepare_dirs,
    prepare_pool,
    write_epoch_files,
)
from odradek.storage.summary import KnownDir, SummaryReader, take_summary, write_summaries

_log = logging.getLogger("odradek.storage")
_IDLE_MS = 60_000


class _MarkBusy:
    """A log's ``on_busy``: puts its key in the manager's busy logs. (Two slots:
    a third of the memory of a ``functools.partial``, a fifth of a closure's.)"""

    __slots__ = ("busy", "key")

    def __init__(self, busy: dict[TopicPartition, None], key: TopicPartition) -> None:
        self.busy = busy
        self.key = key

    def __call__(self) -> None:
        self.busy[self.key] = None


@dataclass(frozen=True, slots=True)
class Tick:
    jobs: list[IoJob]
    """Run each job's ``run()`` on an executor, then its ``complete()`` on the loop."""
    next_deadline_ms: int
    """Monotonic time at which to call :meth:`LogManager.tick` again (or sooner)."""


class LogManager:
    def __init__(
        self,
        fs: FileSystem,
        clock: Clock,
        config: LogManagerConfig,
        default_log_config: LogConfig | None = None,
        *,
        broker_epoch: int = -1,
        ids: Ids | None = None,
        foreign: frozenset[tuple[str, int]] = frozenset(),
        pinned: Mapping[TopicPartition, str] | None = None,
        memory: MemoryReader | None = None,
    ) -> None:
        self.foreign = foreign
        """Partition directories kept by another owner (the Raft log): never opened."""
        self.fs = fs
        self.ids: Ids = ids or RandomIds()
        self.clock = clock
        self.config = config
        self.default_log_config = default_log_config or LogConfig()
        self.broker_epoch = broker_epoch
        self.log_dirs: list[str] = [
            d.rstrip("/") or "/" for d in (config.log_dirs or (config.log_dir,))]
        """``log.dirs``, in order: where partitions are placed."""
        self.log_dir = self.log_dirs[0]
        self.pinned: dict[TopicPartition, str] = {
            tp: d.rstrip("/") or "/" for tp, d in (pinned or {}).items()}
        """Partitions that live in a given directory whatever the placement says (the
        metadata journal in ``metadata.log.dir``), possibly outside ``log.dirs``."""
        self._prepared: dict[TopicPartition, tuple[str, bool]] = {}
        """Directories chosen by :meth:`prepare_new_logs`, by partition, until opened,
        and whether each was made whole (a clean empty log)."""
        self._prepare_pool: Executor | None = None
        self.dirty_bytes: Callable[[], int | None] = dirty_bytes
        """The machine's dirty page bytes (:mod:`odradek.storage.batchsync`)."""
        self.dirs: list[str] = list(dict.fromkeys([*self.log_dirs, *self.pinned.values()]))
        """Every directory this manager keeps: ``log.dirs`` and pinned ones."""
        self.handles = HandleCache(fs, config.max_open_files)
        self._logs: dict[TopicPartition, Log] = {}
        self._futures: dict[TopicPartition, Log] = {}
        self._busy: dict[TopicPartition, None] = {}
        """Logs the next :meth:`tick` looks at, in the order they became busy: every
        log that was not idle at the last tick or has called its ``on_busy``
        since (appends, rolls, truncations, deletions, flushes). An idle log
        costs a tick nothing. (One dict for the manager's life: the logs'
        ``on_busy`` callbacks hold it.)"""
        self._dir_deletes = DeletedDirs(fs)
        now = clock.monotonic_ms()
        self._checkpoints = CheckpointSchedule(config, now)
        self._next_retention_ms = now + config.retention_check_interval_ms
        self.had_clean_shutdown = False
        self.failed: BaseException | None = None
        self._next_clean_ms = now + config.cleaner.backoff_ms
        self.cleaning: CleanJob | None = None
        self.cleaner_pool: CleanerPool | None = (
            CleanerPool(config.cleaner.threads) if isinstance(fs, OsFileSystem) else None)
        """The cleaner pass in flight (one at a time: ``log.cleaner.threads``)."""
        self.page_cache = self._trimmer(fs, config, memory)
        self._shared_io: LogIo | None = None
        """The one :class:`LogIo` of the logs this manager serves appends to."""
        """Drop-behind for every log here (:mod:`odradek.storage.pagecache`)."""
        self.cleaner_stats: dict[str, float] = {
            "passes": 0, "bytes_read": 0, "bytes_written": 0, "last_pass_ms": -1,
            "max_dirty_ratio": 0.0, "last_max_dirty_ratio": 0.0, "last_bytes_read": 0,
            "last_bytes_written": 0, "last_pass_s": 0.0, "pass_started_ms": -1}
        """The cleaner's totals (passes, bytes), and of its last look and pass:
        the highest dirty ratio of any compacted log (``last_max_dirty_ratio``), the
        bytes the last pass read and wrote and how long it took (s); wall ms of
        its end (``last_pass_ms``). Read by the metrics endpoint."""

    def _trimmer(self, fs: FileSystem, config: LogManagerConfig,
                 memory: MemoryReader | None) -> PageCacheTrimmer:
        """Drop-behind over ``memory`` (the kernel's ``/proc`` on a real file
        system; a model's memory reads as unknown, so its window is fixed)."""
        if memory is None:
            memory = read_proc if isinstance(fs, OsFileSystem) else (lambda: NO_READING)
        retain = config.page_cache_retain_bytes
        if retain < 0:
            retain = default_retain(memory().total_bytes)
        gauge = PressureGauge(memory, self.clock.monotonic_ms)
        return PageCacheTrimmer(fs, config.page_cache_window_bytes, retain=retain, gauge=gauge)

    def reconfigure_cleaner(self, settings: CleanerSettings) -> None:
        """New ``log.cleaner.*`` settings while running (dynamic broker configs): the
        next pass uses them and is due now, as Kafka restarts its cleaner threads
        on such a change. The worker pool takes a new size when it next starts."""
        if settings == self.config.cleaner:
            return
        self.config = dataclasses.replace(self.config, cleaner=settings)
        self._next_clean_ms = self.clock.monotonic_ms()
        if self.cleaner_pool is not None:
            self.cleaner_pool.workers = max(settings.threads, 1)

    # -- start-up -------------------------------------------------------------------------

    def startup(self, config_for: Callable[[str], LogConfig] | None = None) -> None:
        """Open every partition log, current and future, of every directory (creating
        the directories if needed). ``config_for(topic)`` supplies per-topic
        configs; default: the manager default. Raises
        :class:`~odradek.storage.logdirs.LogDirsError` for what
        :func:`~odradek.storage.logdirs.scan` refuses."""
        fs = self.fs
        checkpoints: dict[str, tuple[bool, dict[str, dict[TopicPartition, int]]]] = {}
        summaries: dict[str, SummaryReader] = {}
        for directory in self.dirs:
            makedirs_durable(fs, directory)
            checkpoints[directory] = read_dir_checkpoints(fs, directory)
            marker = clean_shutdown_path(directory)
            summary, removed = take_summary(fs, directory, checkpoints[directory][0])
            if summary is not None:
                summaries[directory] = summary
            if fs.exists(marker):
                fs.remove(marker)
                removed = True
            if removed:
                fs.sync_dir(directory)
        self.had_clean_shutdown = all(clean for clean, _ in checkpoints.values())
        try:
            found = scan(fs, self.dirs, self.foreign)
            for tp, path in sorted(found.current.items()):
                promoted = path in found.promoted  # (renamed in: not what the summary saw)
                self._logs[tp] = self._track(tp, self._open(
                    tp, path, checkpoints, config_for, promoted=promoted,
                    known=None if promoted else _known(summaries, tp, path)))
        finally:
            for summary in summaries.values():
                summary.close()
        for tp, path in sorted(found.futures.items()):
            self._futures[tp] = self._open(tp, path, checkpoints, config_for, future=True)
        # The checkpoints' intervals count from now, with every log open, as after
        # a short start: a long one (seconds at 100,000 partitions) would leave
        # them all due at the first tick, just as the broker begins to serve.
        self._checkpoints = CheckpointSchedule(self.config, self.clock.monotonic_ms())

    def _open(self, tp: TopicPartition, path: str,
              checkpoints: Mapping[str, tuple[bool, Mapping[str, Mapping[TopicPartition, int]]]],
              config_for: Callable[[str], LogConfig] | None, *, future: bool = False,
              promoted: bool = False, known: KnownDir | None = None) -> Log:
        clean, offsets = checkpoints[posixpath.dirname(path)]
        config = config_for(tp[0]) if config_for is not None else self.default_log_config
        log = Log.open(
            self.fs,
            path,
            config,
            self.clock,
            handles=HandleCache(self.fs, FUTURE_HANDLES) if future else self.handles,
            # A future log renamed in at start-up was never closed as the current log.
            clean_shutdown=clean and not promoted,
            recovery_point=offsets[RECOVERY_POINT_CHECKPOINT].get(tp, 0),
            log_start_offset=offsets[LOG_START_OFFSET_CHECKPOINT].get(tp, 0),
            high_watermark=offsets[HIGH_WATERMARK_CHECKPOINT].get(tp),
            skip_damage=self.config.skip_damage,
            # A future log is filled inline on the mover's thread.
            io=LogIo() if future else self._io(),
            existing=True,  # (scan listed it)
            known=known,
        )
        log.cleaner_checkpoint = offsets[CLEANER_OFFSET_CHECKPOINT].get(tp, -1)
        return log

    # -- logs -----------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The partition's log, created in its pinned directory or else the log
        directory holding the fewest partitions if there is none."""
        log = self._logs.get((topic, partition))
        if log is None:
            prepared = self._prepared.pop((topic, partition), None)
            path, clean = prepared or (posixpath.join(
                self.pinned.get((topic, partition)) or self._least_used_dir(),
                partition_dir_name(topic, partition)), False)
            log = Log.open(
                self.fs,
                path,
                config or self.default_log_config,
                self.clock,
                handles=self.handles,
                clean_shutdown=clean,
                topic_id=topic_id,
                skip_damage=self.config.skip_damage,
                io=self._io(),
            )
            self._logs[(topic, partition)] = self._track((topic, partition), log)
        return log

    def prepare_new_logs(self, new: Sequence[tuple[TopicPartition, uuid.UUID | None, int | None]]
                         ) -> int:
        """Create, durably and on threads, the directories of the logs in ``new``
        (partition, topic id, leader epoch starting at 0 here or None) that
        :meth:`get_or_create_log` is about to open, so that it finds them
        (:mod:`odradek.storage.prepare`). Only logs with no directory yet, in
        batches of at least :data:`~odradek.storage.prepare.MIN_BATCH`; the number
        prepared."""
        todo = [(tp, topic_id, epoch) for tp, topic_id, epoch in new
                if tp not in self._logs and tp not in self._futures]
        if len(todo) < MIN_BATCH:
            return 0
        unpinned = ([lg.parent_dir for lg in self._all_logs()
                     if (lg.topic, lg.partition) not in self.pinned]
                    if len(self.log_dirs) > 1 else [])
        dirs = place(todo, self.log_dirs, self.pinned, unpinned)
        prepared = prepare_dirs(self.fs, dirs, self._pool())
        # The open uses the directory chosen here, whatever it would choose; one
        # prepared whole opens as a clean empty log.
        for (tp, _, _), d in zip(todo, dirs, strict=True):
            self._prepared[tp] = (d.path, d.path in prepared)
        return len(prepared)

    def write_epochs(self, caches: Sequence[LeaderEpochCache]) -> None:
        """Write the leader-epoch checkpoints of ``caches`` (collected by
        :func:`~odradek.storage.epochs.deferred_writes`) together, each durable
        on return (:func:`~odradek.storage.prepare.write_epoch_files`). A write
        that fails takes its log offline, as the write in place would have."""
        failed = write_epoch_files(self.fs, caches, self.dirs, self.dirty_bytes, self._pool)
        for lg in self._all_logs() if failed else ():
            error = failed.get(id(lg.epochs))
            if error is not None:
                _log.error("%s", lg.local.io_failed("leader-epoch-checkpoint write", error))

    def _pool(self) -> Executor:
        if self._prepare_pool is None:
            self._prepare_pool = prepare_pool()
        return self._prepare_pool

    def _track(self, tp: TopicPartition, log: Log) -> Log:
        """``log`` is ``tp``'s current log from now on: its housekeeping is looked
        at by the next tick, and again whenever it says it is busy."""
        busy = self._busy
        log.local.on_busy = _MarkBusy(busy, tp)
        busy[tp] = None
        return log

    def _least_used_dir(self) -> str:
        """The log directory holding the fewest unpinned logs (current and future);
        with one directory, that one without counting (no work per log)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        return choose_dir(self.log_dirs, [lg.parent_dir for lg in self._all_logs()
                                          if (lg.topic, lg.partition) not in self.pinned])

    def _io(self) -> LogIo:
        """The disk settings of a log this manager serves appends to: its page-cache
        window and how far its segments reserve blocks ahead."""
        io = self._shared_io
        if io is None or io.allocate_ahead_bytes != self.config.preallocate_bytes:
            io = self._shared_io = LogIo(allocate_ahead_bytes=self.config.preallocate_bytes,
                                         page_cache=(self.page_cache if self.page_cache.window >= 0
                                                     else None))
        return io

    def _all_logs(self) -> Iterator[Log]:
        yield from self._logs.values()
        yield from self._futures.values()

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The log directory of the partition's current log (None: no log here)."""
        log = self._logs.get((topic, partition))
        return None if log is None else log.parent_dir

    def delete_log(self, topic: str, partition: int) -> Log | None:
        """Close the log and rename its directory ``...-delete``; its files are removed
        after ``file.delete.delay.ms``. A future log of the partition goes first
        (see :mod:`odradek.storage.logdirs`); it is returned, not closed, for
        its mover to close once no copy runs."""
        future = self.drop_future(topic, partition)
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return future
        log.close()
        if log.local.cache_window is not None:
            log.local.cache_window.forget()
        self._rename_for_deletion(log)
        return future

    def _rename_for_deletion(self, log: Log, delay_ms: int | None = None) -> None:
        parent = log.parent_dir
        target = posixpath.join(parent, deleted_dir_name(log.topic, log.partition,
                                                         self.ids.uuid()))
        self.fs.rename(log.dir_path, target)
        self.fs.sync_dir(parent)
        delay = log.config.file_delete_delay_ms if delay_ms is None else delay_ms
        self._dir_deletes.add(target, self.clock.monotonic_ms() + delay)
        if delay == 0:
            self._dir_deletes.run_due(self.clock.monotonic_ms())

    def move_aside(self, topic: str, partition: int) -> str:
        """Close the log and rename its directory ``<topic>-<partition>.<hex>-stray``
        (Kafka's name): kept for the operator, never read or deleted again.
        A future log of the partition is dropped first. Returns the new path."""
        future = self.drop_future(topic, partition)
        if future is not None:
            future.close()
        log = self._logs.pop((topic, partition))
        log.close()
        parent = log.parent_dir
        target = posixpath.join(parent, stray_dir_name(topic, partition, self.ids.uuid()))
        self.fs.rename(log.dir_path, target)
        self.fs.sync_dir(parent)
        return target

    # -- moves between log directories (AlterReplicaLogDirs) --------------------------------

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def futures(self) -> Mapping[TopicPartition, Log]:
        return self._futures

    def create_future_log(self, topic: str, partition: int, directory: str) -> Log:
        """An empty ``<topic>-<partition>.<hex>-future`` log in ``directory`` (one of
        ``log.dirs``, not the current log's), with the current log's config and
        topic id, opened through a handle cache of its own: the mover fills it
        on a worker thread. Step 1 of :mod:`odradek.storage.logdirs`."""
        tp = (topic, partition)
        current = self._logs[tp]
        assert tp not in self._futures and directory != current.parent_dir
        log = open_future_log(self.fs, self.clock, self.ids, current, directory,
                              skip_damage=self.config.skip_damage)
        self._futures[tp] = log
        return log

    def drop_future(self, topic: str, partition: int) -> Log | None:
        """Rename the partition's future log ``...-delete`` (removed after
        ``file.delete.delay.ms``) and forget it; returns it unclosed (a copy may
        still be writing to it: whoever runs the copy closes it)."""
        log = self._futures.pop((topic, partition), None)
        if log is not None:
            self._rename_for_deletion(log)
        return log

    def promote_future(self, topic: str, partition: int) -> Log:
        """Make the future log the partition's log: steps 2 and 3 of
        :mod:`odradek.storage.logdirs`. The caller has made sure, with nothing
        in between on its thread, that the future log holds every record of the
        current one and is synced at least as far (its recovery point), and that
        no flush of either runs. The old log is closed and its directory removed
        after ``file.delete.delay.ms``. Returns the new current log."""
        tp = (topic, partition)
        old, new = self._logs[tp], self._futures[tp]
        swap_in_future(self.fs, old, new, self.handles, self._rename_for_deletion)
        del self._futures[tp]
        self._logs[tp] = self._track(tp, new)
        new.local.io = self._io()
        # Both directories' checkpoints name it where it is.
        self._checkpoints.write_all_soon(self.clock.monotonic_ms())
        return new

    def logs(self) -> Mapping[TopicPartition, Log]:
        return self._logs

    def __iter__(self) -> Iterator[Log]:
        return iter(self._logs.values())

    @property
    def open_files(self) -> int:
        return self.handles.open_count

    # -- housekeeping -----------------------------------------------------------------------

    def tick(self) -> Tick:
        """Due housekeeping. Retention runs here (renames); flushes, checkpoint
        writes and the removal of deleted files come back as jobs."""
        now = self.clock.monotonic_ms()
        jobs: list[IoJob] = []
        due_files: list[str] = []
        deadline = now + _IDLE_MS
        roll_flushed = False
        retention_due = now >= self._next_retention_ms
        if retention_due:
            self._next_retention_ms = now + self.config.retention_check_interval_ms
        # Every log at a retention check (Kafka's periodic pass); else only the busy.
        busy = list(self._busy)
        self._busy.clear()
        logs: Iterable[Log] = (self._logs.values() if retention_due else
                               [log for tp in busy if (log := self._logs.get(tp)) is not None])
        for log in logs:
            if log.offline:
                continue
            try:
                if retention_due:
                    log.delete_old_segments()
                local = log.local  # the file chores are the local log's
                if local.deletes.pending:
                    files, due = local.deletes.take_due(now)
                    due_files.extend(files)
                    deadline = min(deadline, due if due is not None else deadline)
                if local.flushes.checkpoint_wanted:
                    local.flushes.checkpoint_wanted = False
                    roll_flushed = True
                if local.flush_due():
                    job = local.begin_flush()
                    if job is not None:
                        jobs.append(job)
                due = local.next_flush_deadline_ms()
                if due is not None:
                    deadline = min(deadline, max(due, now + 1))
                if not local.housekeeping_idle():
                    self._busy[(log.topic, log.partition)] = None
            except KafkaStorageError:
                self._busy[(log.topic, log.partition)] = None
                continue
        due_dirs = self._dir_deletes.take_due(now)
        if due_dirs or due_files:
            jobs.append(RemoveDeletedJob(self.fs, due_dirs, self._retry_dir_deletes, due_files))
        deadline = min([deadline, *self._dir_deletes.due_times()])
        if roll_flushed:
            # Checkpoint the recovery point once a rolled segment's fsync is done
            # (the next tick after it), so an unclean stop scans only the active
            # segment, not every segment written since the last periodic checkpoint.
            self._checkpoints.write_soon(RECOVERY_POINT_CHECKPOINT, now)
        checkpoint = self._checkpoint_job(now)
        if checkpoint is not None:
            jobs.append(checkpoint)
        clean = self._clean_job(now)
        if clean is not None:
            jobs.append(clean)
        if self.config.cleaner.enable:
            deadline = min(deadline, self._next_clean_ms)
        deadline = min(deadline, self._next_retention_ms, *self._checkpoints.next.values())
        return Tick(jobs, deadline)

    def _clean_job(self, now: int) -> CleanJob | None:
        """The next cleaner pass: the dirtiest compacted log that is due, every
        ``log.cleaner.backoff.ms`` while nothing is being cleaned."""
        settings = self.config.cleaner
        if not settings.enable or self.cleaning is not None or now < self._next_clean_ms:
            return None
        self._next_clean_ms = now + settings.backoff_ms
        wall = self.clock.now_ms()
        best = dirtiest_log(
            ((log, log.listener.cleaner_view()) for log in self._logs.values()
             if not log.offline and log.config.compact and log.listener is not None
             # A log moving to another directory is paused, as in Kafka.
             and (log.topic, log.partition) not in self._futures),
            wall, self.cleaner_stats)
        if best is None:
            return None
        self.cleaner_stats["pass_started_ms"] = self.clock.monotonic_ms()
        self.cleaning = plan_pass(best[0], best[1], settings, wall, self._cleaned, force=True,
                                  pool=self.cleaner_pool)
        return self.cleaning

    def _cleaned(self, job: CleanJob, error: BaseException | None) -> None:
        self.cleaning = None
        stats = self.cleaner_stats
        if error is not None:
            _log.warning("cleaning %s failed: %s", job.log.dir_path, error)
            return
        stats["passes"] += 1
        stats["bytes_read"] += job.plan.stats.bytes_read
        stats["bytes_written"] += job.plan.stats.bytes_written
        stats["last_bytes_read"] = job.plan.stats.bytes_read
        stats["last_bytes_written"] = job.plan.stats.bytes_written
        stats["last_pass_s"] = max(self.clock.monotonic_ms() - stats["pass_started_ms"], 0) / 1000
        stats["last_pass_ms"] = self.clock.now_ms()
        self._checkpoints.write_soon(CLEANER_OFFSET_CHECKPOINT, self.clock.monotonic_ms())
        # Clean again soon if the map ended early (more dirt is waiting).
        self._next_clean_ms = min(self._next_clean_ms, self.clock.monotonic_ms() + 10)

    def _retry_dir_deletes(self, paths: list[str]) -> None:
        self._dir_deletes.retry(paths, self.clock.monotonic_ms() + 60_000)

    def _checkpoint_job(self, now: int) -> CheckpointJob | None:
        names = self._checkpoints.take_due(now, self.config)
        return self.checkpoint_job(names) if names else None

    def checkpoint_job(self, names: list[str] | None = None) -> CheckpointJob:
        """A job writing the named checkpoint files (default: all) of every
        directory as of now, each listing the logs (current and future) there."""
        contents = checkpoint_contents(self.dirs, (self._logs, self._futures))
        return CheckpointJob(self.fs, self, checkpoint_files(self.fs, contents, names))

    def checkpoint_done(self, error: BaseException | None) -> None:
        self._checkpoints.in_flight = False
        if error is not None:
            # As in Kafka, a log directory whose checkpoints cannot be written is offline.
            self.failed = error

    def write_checkpoints(self) -> None:
        """Write all checkpoint files now, on the calling thread."""
        job = self.checkpoint_job()
        try:
            job.run()
        except OSError as e:
            job.complete(e)
            raise KafkaStorageError(f"checkpoint write failed: {e}") from e
        job.complete(None)

    # -- shutdown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every log (future logs too: no copy may be running), write
        the checkpoints and, if every log is healthy, each directory's
        clean-shutdown marker."""
        healthy = self.failed is None
        if self.cleaner_pool is not None:
            self.cleaner_pool.close()
        if self._prepare_pool is not None:
            self._prepare_pool.shutdown()
        self.page_cache.close()
        for log in list(self._all_logs()):
            if not log.offline:
                with contextlib.suppress(KafkaStorageError):
                    log.flush()
            log.close()
            if log.local.is_future:
                log.handles.close_all()
            healthy = healthy and not log.offline
        try:
            self.write_checkpoints()
            if healthy:
                write_summaries(self.fs, self.dirs, (log.dir_path for log in self._logs.values()))
                for directory in self.dirs:
                    write_clean_shutdown(self.fs, directory, self.broker_epoch)
        finally:
            self.handles.close_all()
            self._logs.clear()
            self._futures.clear()


def _known(summaries: Mapping[str, SummaryReader], tp: TopicPartition,
           path: str) -> KnownDir | None:
    """The clean-shutdown summary's entry for the log directory ``path`` is in."""
    reader = summaries.get(posixpath.dirname(path))
    return reader.take(tp) if reader is not None else None

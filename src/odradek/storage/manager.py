"""All partition logs of one log directory, their checkpoints and housekeeping.

Layout of ``log.dir``::

    .kafka_cleanshutdown               present only between a clean close and the next start
    recovery-point-offset-checkpoint   per partition: offsets below are fsynced
    log-start-offset-checkpoint        per partition: the log start offset
    replication-offset-checkpoint      per partition: the high watermark
    <topic>-<partition>/               one directory per partition log (see log.py)
    <topic>-<partition>.<hex>-delete/  a deleted partition, removed after file.delete.delay.ms

Start-up (:meth:`LogManager.startup`) reads the checkpoints, removes the
clean-shutdown marker (and syncs that removal) before touching any log, so a
crash during start-up is never mistaken for a clean stop, then opens every
partition directory: trusting the files after a clean shutdown, recovering
from each log's recovery point otherwise.

The broker drives the rest without blocking its loop: :meth:`LogManager.tick`
runs cheap housekeeping in place (retention passes, delayed file removal) and
returns the fsync work (:class:`~odradek.storage.flush.FlushJob`, checkpoint
writes) as jobs for an executor, plus the monotonic time at which to call it
again. Files are opened through one shared, capped handle cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from odradek.common.clock import Clock
from odradek.common.ids import Ids, RandomIds
from odradek.storage.checkpoint import (
    CheckpointFormatError,
    TopicPartition,
    clean_shutdown_path,
    format_offsets,
    read_offsets,
    write_atomically,
    write_clean_shutdown,
)
from odradek.storage.cleaner import (
    CleanerPool,
    CleanerView,
    CleanJob,
    first_uncleanable,
    needs_cleaning,
    plan_pass,
)
from odradek.storage.config import CleanerSettings, LogConfig, LogManagerConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.flush import IoJob
from odradek.storage.fs import FileSystem, OsFileSystem, makedirs_durable
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log
from odradek.storage.names import (
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_DIR_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    deleted_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
    stray_dir_name,
)

_log = logging.getLogger("odradek.storage")
_IDLE_MS = 60_000


@dataclass(slots=True)
class CheckpointJob:
    """Replace some checkpoint files (write, fsync, rename, sync dir) off the loop."""

    fs: FileSystem
    manager: LogManager
    files: list[tuple[str, bytes]]
    done: bool = field(default=False)

    def run(self) -> None:
        for path, data in self.files:
            write_atomically(self.fs, path, data)

    def complete(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            self.manager.checkpoint_done(error)


@dataclass
class RemoveDeletedJob:
    """Remove what ``file.delete.delay.ms`` has let go, off the loop: the
    directories of deleted logs (``paths``) and the ``*.deleted`` files of
    segments dropped by retention (``files``). Unlinking a large file drops its
    page cache and can take long enough to stall every connection. After a
    failure the directories are tried again a minute later; a leftover
    segment file is only disk space until the log directory goes."""

    fs: FileSystem
    paths: list[str]
    retry: Callable[[list[str]], None]
    files: list[str] = field(default_factory=list)

    def run(self) -> None:
        for file in self.files:
            with contextlib.suppress(FileNotFoundError):
                self.fs.remove(file)
        for path in self.paths:
            if self.fs.exists(path):
                self.fs.rmtree(path)

    def complete(self, error: BaseException | None = None) -> None:
        if error is not None:
            self.retry(self.paths)


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
    ) -> None:
        self.foreign = foreign
        """Partition directories kept by another owner (the Raft log): never opened."""
        self.fs = fs
        self.ids: Ids = ids or RandomIds()
        self.clock = clock
        self.config = config
        self.default_log_config = default_log_config or LogConfig()
        self.broker_epoch = broker_epoch
        self.log_dir = config.log_dir.rstrip("/") or "/"
        self.handles = HandleCache(fs, config.max_open_files)
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_deletes: list[tuple[int, str]] = []
        self._checkpoint_in_flight = False
        now = clock.monotonic_ms()
        self._next = {
            RECOVERY_POINT_CHECKPOINT: now + config.recovery_point_checkpoint_interval_ms,
            LOG_START_OFFSET_CHECKPOINT: now + config.log_start_offset_checkpoint_interval_ms,
            HIGH_WATERMARK_CHECKPOINT: now + config.high_watermark_checkpoint_interval_ms,
        }
        self._next_retention_ms = now + config.retention_check_interval_ms
        self.had_clean_shutdown = False
        self.failed: BaseException | None = None
        self._next_clean_ms = now + config.cleaner.backoff_ms
        self.cleaning: CleanJob | None = None
        self.cleaner_pool: CleanerPool | None = (
            CleanerPool(config.cleaner.threads) if isinstance(fs, OsFileSystem) else None)
        """The cleaner pass in flight (one at a time: ``log.cleaner.threads``)."""
        self.cleaner_stats: dict[str, float] = {
            "passes": 0, "bytes_read": 0, "bytes_written": 0, "last_pass_ms": -1,
            "max_dirty_ratio": 0.0}

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
        """Open every partition log in ``log.dir`` (creating the directory if needed).
        ``config_for(topic)`` supplies per-topic configs; default: the manager default."""
        fs = self.fs
        makedirs_durable(fs, self.log_dir)
        marker = clean_shutdown_path(self.log_dir)
        clean = fs.exists(marker)
        recovery = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        if recovery is None:
            clean, recovery = False, {}
        starts = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT) or {}
        hws = self._read_checkpoint(HIGH_WATERMARK_CHECKPOINT) or {}
        dirty = self._read_checkpoint(CLEANER_OFFSET_CHECKPOINT) or {}
        if fs.exists(marker):
            fs.remove(marker)
            fs.sync_dir(self.log_dir)
        self.had_clean_shutdown = clean
        for name in sorted(fs.listdir(self.log_dir)):
            path = posixpath.join(self.log_dir, name)
            if not fs.is_dir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                fs.rmtree(path)
                continue
            tp = parse_partition_dir_name(name)
            if tp is None or tp in self.foreign:
                continue  # -future, -stray, or not ours
            config = config_for(tp[0]) if config_for is not None else self.default_log_config
            self._logs[tp] = Log.open(
                fs,
                path,
                config,
                self.clock,
                handles=self.handles,
                clean_shutdown=clean,
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=hws.get(tp),
                skip_damage=self.config.skip_damage,
            )
            self._logs[tp].cleaner_checkpoint = dirty.get(tp, -1)

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int] | None:
        """Entries of a checkpoint; None when it is unreadable (then recover everything)."""
        try:
            return read_offsets(self.fs, posixpath.join(self.log_dir, name))
        except (CheckpointFormatError, UnicodeDecodeError):
            return None

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
        log = self._logs.get((topic, partition))
        if log is None:
            path = posixpath.join(self.log_dir, partition_dir_name(topic, partition))
            log = Log.open(
                self.fs,
                path,
                config or self.default_log_config,
                self.clock,
                handles=self.handles,
                topic_id=topic_id,
                skip_damage=self.config.skip_damage,
            )
            self._logs[(topic, partition)] = log
        return log

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and rename its directory ``...-delete``; its files are removed
        after ``file.delete.delay.ms``."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return
        log.close()
        target = posixpath.join(self.log_dir, deleted_dir_name(topic, partition, self.ids.uuid()))
        self.fs.rename(log.dir_path, target)
        self.fs.sync_dir(self.log_dir)
        due = self.clock.monotonic_ms() + log.config.file_delete_delay_ms
        self._dir_deletes.append((due, target))
        if log.config.file_delete_delay_ms == 0:
            self._run_dir_deletes(self.clock.monotonic_ms())

    def move_aside(self, topic: str, partition: int) -> str:
        """Close the log and rename its directory ``<topic>-<partition>.<hex>-stray``
        (Kafka's name): kept for the operator, never read or deleted again.
        Returns the new path."""
        log = self._logs.pop((topic, partition))
        log.close()
        target = posixpath.join(self.log_dir, stray_dir_name(topic, partition, self.ids.uuid()))
        self.fs.rename(log.dir_path, target)
        self.fs.sync_dir(self.log_dir)
        return target

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
        for log in self._logs.values():
            if log.offline:
                continue
            try:
                if retention_due:
                    log.delete_old_segments()
                if log.pending_deletes:
                    files, due = log.take_due_deletes()
                    due_files.extend(files)
                    deadline = min(deadline, due if due is not None else deadline)
                if log.checkpoint_wanted:
                    log.checkpoint_wanted = False
                    roll_flushed = True
                if log.flush_due():
                    job = log.begin_flush()
                    if job is not None:
                        jobs.append(job)
                due = log.next_flush_deadline_ms()
                if due is not None:
                    deadline = min(deadline, max(due, now + 1))
            except KafkaStorageError:
                continue
        due_dirs = [path for due, path in self._dir_deletes if due <= now]
        if due_dirs or due_files:
            self._dir_deletes = [(due, path) for due, path in self._dir_deletes if due > now]
            jobs.append(RemoveDeletedJob(self.fs, due_dirs, self._retry_dir_deletes, due_files))
        deadline = min([deadline, *(due for due, _ in self._dir_deletes)])
        if roll_flushed:
            # Checkpoint the recovery point once a rolled segment's fsync is done
            # (the next tick after it), so an unclean stop scans only the active
            # segment, not every segment written since the last periodic checkpoint.
            self._next[RECOVERY_POINT_CHECKPOINT] = now
        checkpoint = self._checkpoint_job(now)
        if checkpoint is not None:
            jobs.append(checkpoint)
        clean = self._clean_job(now)
        if clean is not None:
            jobs.append(clean)
        if self.config.cleaner.enable:
            deadline = min(deadline, self._next_clean_ms)
        deadline = min(deadline, self._next_retention_ms, *self._next.values())
        return Tick(jobs, deadline)

    def _clean_job(self, now: int) -> CleanJob | None:
        """The next cleaner pass: the dirtiest compacted log that is due, every
        ``log.cleaner.backoff.ms`` while nothing is being cleaned."""
        settings = self.config.cleaner
        if not settings.enable or self.cleaning is not None or now < self._next_clean_ms:
            return None
        self._next_clean_ms = now + settings.backoff_ms
        wall = self.clock.now_ms()
        best: tuple[float, Log, CleanerView] | None = None
        for log in self._logs.values():
            if log.offline or not log.config.compact or log.cleaner_view is None:
                continue
            view = log.cleaner_view()
            first_dirty = log.cleaner_checkpoint
            if not log.log_start_offset <= first_dirty <= log.log_end_offset:
                first_dirty = log.log_start_offset
            ratio = needs_cleaning(log, first_dirty, first_uncleanable(log, view, wall), wall)
            self.cleaner_stats["max_dirty_ratio"] = max(
                self.cleaner_stats["max_dirty_ratio"], ratio)
            if ratio >= 0 and (best is None or ratio > best[0]):
                best = (ratio, log, view)
        if best is None:
            return None
        self.cleaning = plan_pass(best[1], best[2], settings, wall, self._cleaned, force=True,
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
        stats["last_pass_ms"] = self.clock.now_ms()
        self._next[CLEANER_OFFSET_CHECKPOINT] = self.clock.monotonic_ms()
        # Clean again soon if the map ended early (more dirt is waiting).
        self._next_clean_ms = min(self._next_clean_ms, self.clock.monotonic_ms() + 10)

    def _retry_dir_deletes(self, paths: list[str]) -> None:
        due = self.clock.monotonic_ms() + 60_000
        self._dir_deletes.extend((due, path) for path in paths if self.fs.exists(path))

    def _run_dir_deletes(self, now: int) -> int | None:
        remaining = []
        for due, path in self._dir_deletes:
            if due > now:
                remaining.append((due, path))
            elif self.fs.exists(path):
                self.fs.rmtree(path)
        self._dir_deletes = remaining
        return min((due for due, _ in remaining), default=None)

    def _checkpoint_job(self, now: int) -> CheckpointJob | None:
        if self._checkpoint_in_flight:
            return None
        names = [name for name, due in self._next.items() if due <= now]
        if not names:
            return None
        intervals = {
            RECOVERY_POINT_CHECKPOINT: self.config.recovery_point_checkpoint_interval_ms,
            LOG_START_OFFSET_CHECKPOINT: self.config.log_start_offset_checkpoint_interval_ms,
            HIGH_WATERMARK_CHECKPOINT: self.config.high_watermark_checkpoint_interval_ms,
        }
        for name in names:
            if name in intervals:
                self._next[name] = now + intervals[name]
            else:
                del self._next[name]  # written once when asked for (after a pass)
        self._checkpoint_in_flight = True
        return self.checkpoint_job(names)

    def checkpoint_job(self, names: list[str] | None = None) -> CheckpointJob:
        """A job writing the named checkpoint files (default: all three) as of now."""
        contents = self._checkpoint_contents()
        chosen = names or list(contents)
        if not contents[CLEANER_OFFSET_CHECKPOINT] and not self.fs.exists(
                posixpath.join(self.log_dir, CLEANER_OFFSET_CHECKPOINT)):
            chosen = [n for n in chosen if n != CLEANER_OFFSET_CHECKPOINT]  # no cleaning yet
        files = [(posixpath.join(self.log_dir, n), format_offsets(contents[n])) for n in chosen]
        return CheckpointJob(self.fs, self, files)

    def _checkpoint_contents(self) -> dict[str, dict[TopicPartition, int]]:
        return {
            RECOVERY_POINT_CHECKPOINT: {tp: log.recovery_point for tp, log in self._logs.items()},
            LOG_START_OFFSET_CHECKPOINT: {
                tp: log.log_start_offset for tp, log in self._logs.items()
            },
            HIGH_WATERMARK_CHECKPOINT: {tp: log.high_watermark for tp, log in self._logs.items()},
            CLEANER_OFFSET_CHECKPOINT: {
                tp: log.cleaner_checkpoint for tp, log in self._logs.items()
                if log.cleaner_checkpoint >= 0
            },
        }

    def checkpoint_done(self, error: BaseException | None) -> None:
        self._checkpoint_in_flight = False
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
            raise KafkaStorageError(f"checkpoint write in {self.log_dir} failed: {e}") from e
        job.complete(None)

    # -- shutdown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every log, write the checkpoints and, if every log is
        healthy, the clean-shutdown marker."""
        healthy = self.failed is None
        if self.cleaner_pool is not None:
            self.cleaner_pool.close()
        for log in self._logs.values():
            if not log.offline:
                with contextlib.suppress(KafkaStorageError):
                    log.flush()
            log.close()
            healthy = healthy and not log.offline
        try:
            self.write_checkpoints()
            if healthy:
                write_clean_shutdown(self.fs, self.log_dir, self.broker_epoch)
        finally:
            self.handles.close_all()
            self._logs.clear()

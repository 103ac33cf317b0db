"""When to fsync, and the fsync itself as a job that can run on another thread.

The event loop must not block on ``fsync``. So a flush has three steps:

1. ``Log.begin_flush()`` on the loop (:meth:`FlushSchedule.prepare`): writes
   pending index entries (page cache only) and returns a :class:`FlushJob`
   naming the files and directories to sync and the offset the flush covers
   (the log end offset at that moment).
2. ``job.run()`` on an executor thread: only ``fsync`` calls, by path; it
   touches no log state.
3. ``job.complete(error)`` back on the loop: advances the recovery point, or on
   an error takes the log offline (after a failed fsync the page cache state is
   unknown, so nothing more is trusted until a reopen recovers the log).

Group commit falls out: a log runs at most one flush at a time; appends made
while it runs are covered by the next one, so many appends share one fsync.

:class:`FlushPolicy` answers "is a flush due?" for ``flush.messages`` and
``flush.ms`` and gives the next deadline instead of sleeping. A roll makes a
flush due at once, as in Kafka, which flushes a segment when it stops being
active whatever the policy says.

:class:`FlushSchedule` is one log's flush bookkeeping: the recovery point
(every offset below it is fsynced), the messages appended since the last
flush, the flush in flight, and whether the directory needs a sync. Invariant:
``recovery_point <= log end``; while a flush runs, a truncation or a roll below
what it covers lowers the cap it may move the recovery point to.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.common.clock import Clock
from odradek.storage.config import LONG_MAX
from odradek.storage.fs import FileSystem


class IoJob(Protocol):
    """Blocking IO prepared on the loop: ``run`` on a thread, then ``complete`` on the loop."""

    def run(self) -> None: ...

    def complete(self, error: BaseException | None = None) -> None: ...


class _FlushOwner(Protocol):
    def complete_flush(self, job: FlushJob, error: BaseException | None) -> None: ...


class _Flushed(Protocol):
    """A segment as a flush sees it (:class:`~odradek.storage.segment.Segment` is one)."""

    dirty: bool
    next_offset: int

    @property
    def paths(self) -> tuple[str, ...]: ...

    def write_indexes(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

    def due(self, *, unflushed_messages: int, last_flush_ms: int, now_ms: int) -> bool:
        if unflushed_messages <= 0:
            return False
        if unflushed_messages >= self.flush_messages:
            return True
        return self.flush_ms != LONG_MAX and now_ms - last_flush_ms >= self.flush_ms

    def deadline_ms(self, *, unflushed_messages: int, last_flush_ms: int) -> int | None:
        """Monotonic time at which ``flush.ms`` makes a flush due, or None."""
        if unflushed_messages <= 0 or self.flush_ms == LONG_MAX:
            return None
        return last_flush_ms + self.flush_ms


@functools.lru_cache(maxsize=64)
def flush_policy(flush_messages: int, flush_ms: int) -> FlushPolicy:
    """The one :class:`FlushPolicy` of these settings (logs of the same config
    share it: it is frozen)."""
    return FlushPolicy(flush_messages, flush_ms)


@dataclass(slots=True)
class FlushJob:
    fs: FileSystem
    owner: _FlushOwner
    up_to_offset: int
    """Every offset below this is durable once the job completes without error."""
    files: Sequence[str]
    dirs: Sequence[str]
    messages: int
    started_ms: int
    partition: tuple[str, int] = ("", -1)
    """(topic, partition) of the log flushed: a flush of it and this one are one at
    a time."""
    done: bool = field(default=False)

    def run(self) -> None:
        """The blocking part. Safe on any thread; raises OSError on failure."""
        for path in self.files:
            try:
                self.fs.fsync(path)
            except FileNotFoundError:
                # Deleted (retention, truncation) since the job was prepared:
                # nothing of it needs to be durable any more.
                continue
        for path in self.dirs:
            self.fs.sync_dir(path)

    def complete(self, error: BaseException | None = None) -> None:
        """Report the outcome of :meth:`run` to the log (on the loop thread)."""
        if not self.done:
            self.done = True
            self.owner.complete_flush(self, error)


@dataclass(slots=True)
class FlushSchedule:
    """One log's flush state (:class:`~odradek.storage.local_log.LocalLog` owns one)."""

    recovery_point: int
    """Every offset below this is durable (fsynced)."""
    last_flush_ms: int
    """Monotonic start of the last completed flush."""
    policy: FlushPolicy
    unflushed_messages: int = 0
    in_flight: FlushJob | None = None
    recovery_cap: int | None = None
    """The lowest offset a truncation or roll cut the log to while :attr:`in_flight`
    ran: that flush makes nothing durable past it."""
    dir_dirty: bool = False
    """The directory's entries changed (a segment created, renamed or deleted)."""
    checkpoint_wanted: bool = False
    """A flush took the recovery point past a rolled segment: the log manager writes
    the recovery-point checkpoint at its next tick."""

    def cap(self, offset: int) -> None:
        """Nothing at or past ``offset`` may count as durable (a roll, a truncation)."""
        self.recovery_point = min(self.recovery_point, offset)
        if self.in_flight is not None:
            low = self.recovery_cap
            self.recovery_cap = offset if low is None else min(low, offset)

    def due(self, active_base: int, now_ms: int) -> bool:
        """Is a flush wanted now? (``flush.messages`` / ``flush.ms`` reached, or a
        rolled segment not yet flushed.) Never while one runs."""
        if self.in_flight is not None:
            return False
        if self.recovery_point < active_base:
            return True
        return self.policy.due(unflushed_messages=self.unflushed_messages,
                               last_flush_ms=self.last_flush_ms, now_ms=now_ms)

    def append_waits(self, active_base: int, now_ms: int) -> bool:
        """Must the answer to an append just made wait for an fsync? As :meth:`due`,
        but a flush in flight does not make it no: that flush does not cover the
        append, so only what it does not cover counts, and the caller waits for
        it and then for the next one (group commit)."""
        if self.recovery_point < active_base:
            return True
        in_flight = self.in_flight
        return self.policy.due(
            unflushed_messages=self.unflushed_messages - (in_flight.messages if in_flight
                                                          else 0),
            last_flush_ms=self.last_flush_ms, now_ms=now_ms)

    def deadline_ms(self, active_base: int, now_ms: int) -> int | None:
        """Monotonic time at which a flush becomes due by ``flush.ms``, if one will."""
        if self.recovery_point < active_base:
            return now_ms
        return self.policy.deadline_ms(unflushed_messages=self.unflushed_messages,
                                       last_flush_ms=self.last_flush_ms)

    def prepare(self, fs: FileSystem, owner: _FlushOwner, segments: Sequence[_Flushed], *,
                log_end: int, dir_path: str, pending_messages: int, clock: Clock,
                partition: tuple[str, int]) -> FlushJob | None:
        """A flush of everything written so far (step 1 of the module doc): the
        segments' pending index entries are written and the job is in flight.
        None if one is running or there is nothing to flush. ``pending_messages``
        are appended but not yet written (the flush does not cover them). Raises
        OSError if an index write fails (the segments stay dirty)."""
        if self.in_flight is not None:
            return None
        if log_end <= self.recovery_point and not self.dir_dirty:
            self.unflushed_messages = 0
            return None
        files: list[str] = []
        for seg in segments:
            if seg.dirty or seg.next_offset > self.recovery_point:
                seg.write_indexes()
                seg.dirty = False
                files.extend(seg.paths)
        dirs = [dir_path] if self.dir_dirty else []
        self.dir_dirty = False
        job = FlushJob(fs=fs, owner=owner, up_to_offset=log_end, files=files, dirs=dirs,
                       messages=self.unflushed_messages - pending_messages,
                       started_ms=clock.monotonic_ms(), partition=partition)
        self.began(job)
        return job

    def began(self, job: FlushJob) -> None:
        self.in_flight = job
        self.recovery_cap = None

    def completed(self, job: FlushJob, log_end: int, active_base: int) -> None:
        """``job`` ran without error: move the recovery point to what it covered."""
        if self.in_flight is job:
            self.in_flight = None
        durable = job.up_to_offset
        if self.recovery_cap is not None:
            # Truncated or rolled while the job ran: what it synced may not cover it.
            durable = min(durable, self.recovery_cap)
            self.recovery_cap = None
        before = self.recovery_point
        self.recovery_point = min(max(self.recovery_point, durable), log_end)
        if before < active_base <= self.recovery_point:
            self.checkpoint_wanted = True
        self.unflushed_messages = max(self.unflushed_messages - job.messages, 0)
        self.last_flush_ms = job.started_ms

    def failed(self, job: FlushJob) -> None:
        if self.in_flight is job:
            self.in_flight = None
        self.dir_dirty = True

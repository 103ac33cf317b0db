"""Appends whose bytes are written off the event loop, in order, and published after.

A log (:class:`~odradek.storage.log.Log`) given a :class:`WriteSink` no longer
writes in :meth:`Log.append`. The append is split in three, like a flush
(:mod:`odradek.storage.flush`):

1. **Assign, on the loop.** Validation, the producer-state check, offsets
   (from the log's *next offset*), the leader epoch, a roll if one is due, and
   a place in the active segment (its *reserved* size) are all decided at once,
   in request order; the bytes become an :class:`AppendJob` handed to the sink.
2. **Write, on a writer thread.** :meth:`AppendJob.run` does the one
   ``pwritev`` (:func:`run_jobs` one for each run of back-to-back jobs of a
   writer thread's turn) through its own file handle (never one of the loop's
   :class:`~odradek.storage.handles.HandleCache`, which may close its handles
   at any time). The sink runs a log's jobs one at a time, in the order given.
3. **Publish, on the loop, in order.** :meth:`AppendJob.complete` tells the
   log: the segment indexes the batches and grows, and the log end offset (the
   *written* end) moves past them. Only then can a fetch, a follower or the
   high watermark see them.

Invariants (``next`` is the next offset to assign, ``LEO`` the written end)::

    HW <= LEO <= next;  LEO == next  when no job is pending
    pending jobs cover [LEO, next) contiguously, in assignment order
    a segment's size, indexes and next offset describe written bytes only
    a job of generation g is written only if no earlier job of g failed

A write that fails poisons its generation: later jobs of the same log (already
assigned, queued behind it) are skipped unwritten. Completing the failed job
rolls the log back to its written end (a full disk: the log stays online, the
next append tries again) or takes it offline (any other error), and starts a
new generation; every skipped job then completes with the same error. Without
a sink the log writes inline (``run`` then ``complete``, as before): the
metadata journal, tests, and the in-memory simulations use that.

:class:`WriteQueue` is one log's queue of pending jobs (oldest first), with
the generation and the writer-side :class:`WriteStream`; the log
(:class:`~odradek.storage.local_log.LocalLog`) assigns and publishes, the
queue keeps the order.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.storage.fs import FileHandle, FileSystem
from odradek.wire.primitives import Buffer

if TYPE_CHECKING:
    from odradek.storage.errors import StorageError
    from odradek.storage.segment import BatchMeta, Segment


class _Owner(Protocol):
    def complete_append(self, job: AppendJob, error: BaseException | None) -> None: ...


class WriteSink(Protocol):
    """Where a log sends its :class:`AppendJob` s: something that runs each job's
    ``run`` off the loop, one job of a log at a time in submission order, and
    then its ``complete`` on the loop, in the same order."""

    def submit(self, job: AppendJob) -> None: ...


class SkippedWrite(OSError):
    """A job not written because an earlier write of its log failed."""


_RAN = threading.Condition()
"""The condition every :attr:`WriteStream.ran` is (see there)."""


class WriteStream:
    """The writer-side state of one log: the generation a failed write poisoned
    and the file handle its jobs write through. Touched by one writer thread at
    a time (the sink runs a log's jobs one at a time)."""

    __slots__ = ("_handle", "_path", "fs", "poisoned", "ran")

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.poisoned = -1
        self.ran = _RAN
        """Notified each time one of the log's jobs has run (a drain waits on it).
        One condition shared by every log (a condition per log costs a kilobyte):
        a waiter checks its own job's flag, so a wake-up for another log's job
        only sends it back to waiting."""
        self._path = ""
        self._handle: FileHandle | None = None

    def handle_for(self, path: str) -> FileHandle:
        if self._handle is None or self._path != path:
            self.release()
            self._handle = self.fs.open(path)
            self._path = path
        return self._handle

    def release(self) -> None:
        """Close the handle (the sink calls this when the log's queue is empty)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()


@dataclass(slots=True, eq=False)
class AppendJob:
    """The bytes of one append and where they go: ``chunks`` at ``position`` of the
    segment ``seg`` (its ``.log`` file), holding offsets
    [``first_offset``, ``next_offset``) in ``metas`` (per batch: last offset, max
    timestamp, size)."""

    owner: _Owner
    stream: WriteStream
    seg: Segment
    position: int
    chunks: Sequence[Buffer]
    metas: Sequence[BatchMeta]
    size: int
    first_offset: int
    next_offset: int
    records: int
    generation: int
    handle: FileHandle | None = None
    """Inline writes use the log's own handle; a writer thread opens its own."""
    inactive_after: bool = False
    """The segment was rolled while this, its last job, was pending: it becomes
    inactive (final time-index entry, indexes written) once this completes."""
    cut_failed: bool = False
    """The write failed and cutting the file back failed too (the log goes offline)."""
    error: BaseException | None = None
    """What ``run`` raised, kept for whoever completes the job."""
    ran: bool = False
    """True once ``run`` returned or raised (see :meth:`wait_ran`)."""
    done: bool = False
    failure: StorageError | None = None
    """After completion: the error the append's answer carries (None: written)."""
    token: Any = None
    """For the sink and its callers (the broker keeps its waiters here)."""

    def run(self) -> None:
        """The blocking part; any thread. Raises OSError (the write failed, and the
        file was cut back to ``position``; or it was skipped)."""
        stream = self.stream
        try:
            if stream.poisoned == self.generation:
                raise SkippedWrite("an earlier write to this log failed")
            handle = self.handle or stream.handle_for(self.seg.log_path)
            try:
                handle.pwrite(self.position, self.chunks)
            except OSError:
                stream.poisoned = self.generation
                try:
                    handle.truncate(self.position)  # cut what part of the write landed
                except OSError:
                    self.cut_failed = True
                raise
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            with stream.ran:
                self.ran = True
                stream.ran.notify_all()

    def wait_ran(self) -> None:
        """Block until :meth:`run` has returned or raised (on another thread)."""
        cond = self.stream.ran
        with cond:
            while not self.ran:
                cond.wait()

    def complete(self, error: BaseException | None = None) -> None:
        """Report the outcome of :meth:`run` to the log (on the loop thread)."""
        if not self.done:
            self.done = True
            self.owner.complete_append(self, error)


def run_jobs(jobs: Sequence[AppendJob]) -> None:
    """Run one log's jobs in order (a writer thread's turn), writing each run of
    back-to-back jobs (same segment file, handle and generation, each starting
    where the one before ends) with one ``pwritev``: a thread that must win
    the GIL back after every write takes one such wait per run, not per job.

    The outcome is that of :meth:`AppendJob.run` on each in turn, except when a
    combined write fails: the file is cut back to the run's first position,
    the first job carries the error and the others are skipped (as if the
    first had failed alone). Nothing is raised; errors stay on the jobs."""
    i, n = 0, len(jobs)
    while i < n:
        first = jobs[i]
        end = first.position + first.size
        j = i + 1
        while j < n:
            job = jobs[j]
            if (job.seg is not first.seg or job.stream is not first.stream
                    or job.handle is not first.handle or job.generation != first.generation
                    or job.position != end):
                break
            end += job.size
            j += 1
        if j == i + 1:
            with contextlib.suppress(Exception):  # kept on the job (job.error)
                first.run()
        else:
            _run_together(jobs[i:j])
        i = j


def _run_together(group: Sequence[AppendJob]) -> None:
    first = group[0]
    stream = first.stream
    try:
        if stream.poisoned == first.generation:
            raise SkippedWrite("an earlier write to this log failed")
        handle = first.handle or stream.handle_for(first.seg.log_path)
        try:
            handle.pwrite(first.position, [c for job in group for c in job.chunks])
        except OSError:
            stream.poisoned = first.generation
            try:
                handle.truncate(first.position)
            except OSError:
                first.cut_failed = True
            raise
    except Exception as exc:
        first.error = exc
        for job in group[1:]:
            job.error = SkippedWrite("an earlier write to this log failed")
    finally:
        with stream.ran:
            for job in group:
                job.ran = True
            stream.ran.notify_all()


_NO_JOBS: deque[AppendJob] = deque(maxlen=0)
"""The empty job queue every :class:`WriteQueue` starts with (maxlen 0: an
append to it by mistake drops the job rather than sharing it)."""


class WriteQueue:
    """One log's pending appends, oldest first: the jobs assigned offsets whose
    bytes are not yet published. Jobs complete in the order they were queued."""

    __slots__ = ("_fs", "_stream", "generation", "jobs", "messages", "sink")

    def __init__(self, fs: FileSystem) -> None:
        self.jobs: deque[AppendJob] = _NO_JOBS
        """Oldest first. An idle log shares :data:`_NO_JOBS` (never appended to: an
        empty deque costs 600 bytes); its first append gives it its own."""
        self.messages = 0
        """Records in the pending jobs (a flush begun now does not cover them)."""
        self.generation = 0
        """Bumped by a failed write: later jobs of the old generation are skipped."""
        self._fs = fs
        self._stream: WriteStream | None = None
        self.sink: WriteSink | None = None
        """Where jobs are written, off the loop; None writes each inline."""

    def __bool__(self) -> bool:
        return bool(self.jobs)

    @property
    def stream(self) -> WriteStream:
        """The log's writer-side state, made by its first append (an idle log
        holds none)."""
        stream = self._stream
        if stream is None:
            stream = self._stream = WriteStream(self._fs)
        return stream

    @property
    def last(self) -> AppendJob | None:
        """The newest job not yet completed: once it completes, so has every other."""
        return self.jobs[-1] if self.jobs else None

    def submit(self, job: AppendJob) -> AppendJob | None:
        """Queue ``job`` and hand it to the sink (returned: pending), or, without a
        sink, write and complete it now (None). Raises the job's failure when an
        inline write fails."""
        self.messages += job.records
        if self.jobs is _NO_JOBS:
            self.jobs = deque()
        self.jobs.append(job)
        if self.sink is not None:
            self.sink.submit(job)
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

    def take(self, job: AppendJob, where: str) -> bool:
        """``job`` completed: take it off the head of the queue. Returns whether it
        is of the current generation (False: an earlier write failed, so it was
        skipped)."""
        head = self.jobs.popleft() if self.jobs else None
        if head is not job:
            raise AssertionError(f"{where}: append completed out of order")
        self.messages -= job.records
        return job.generation == self.generation

    def drain(self) -> None:
        """Wait (blocking this thread) for every pending job, completing each in order."""
        while self.jobs:
            job = self.jobs[0]
            job.wait_ran()
            job.complete(job.error)

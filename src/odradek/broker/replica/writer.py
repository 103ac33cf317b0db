"""The writer threads: segment appends off the event loop, in order per partition.

With ``odradek.log.writer.threads`` > 0 (0, the default, writes on the loop;
docs/decisions.md has the measurements behind that default), a partition's
log hands its appends to :class:`LogWriter` as
:class:`~odradek.storage.writes.AppendJob` s (see that module for the design
and invariants). The writer keeps one FIFO *strand* per log. A thread wakes,
takes every strand ready at that moment (up to a budget of jobs), runs their
jobs in order (``pwritev`` releases the GIL) and posts the completions to the
loop in one callback, which completes them in order and tells the partition
shell (HW, waiting fetches, waiting produces). A strand is on at most one
thread at a time, so one partition's writes never reorder; a write stalled in
the kernel holds up its own partition and the strands taken in the same turn,
while strands readied later go to the other threads. The loop never waits for
a write: it keeps reading requests and answering other partitions.

Synchronisation with the rest of the log is in :mod:`odradek.storage.writes`
and :class:`~odradek.storage.log.Log`: offsets are assigned on the loop; the
log end, indexes and HW move only on completion; truncation, cleaner swaps,
segment deletion and close first wait for the pending writes of that log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from odradek.storage.writes import AppendJob, WriteStream, run_jobs

log = logging.getLogger("odradek.broker")

K = TypeVar("K")
MAX_JOBS_PER_TURN = 64
"""Jobs a thread takes per turn (from every ready strand, in order)."""


@dataclass(eq=False)
class _Strand(Generic[K]):
    key: K
    jobs: deque[AppendJob] = field(default_factory=deque)
    scheduled: bool = False
    streams: set[WriteStream] = field(default_factory=set)


class LogWriter(Generic[K]):
    """Runs append jobs on ``threads`` threads, strand by strand (``key``: the
    partition), and calls ``on_done([(key, jobs), ...])`` on ``loop`` after each turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int,
                 on_done: Callable[[list[tuple[K, list[AppendJob]]]], None]) -> None:
        self._loop = loop
        self._on_done = on_done
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._ready: deque[_Strand[K]] = deque()
        self._strands: dict[K, _Strand[K]] = {}
        self._idle = 0
        """Threads waiting for work, and of those, how many were woken already."""
        self._woken = 0
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"odradek-writer-{i}",
                                          daemon=True) for i in range(max(threads, 1))]
        for t in self._threads:
            t.start()

    def sink(self, key: K) -> _Sink[K]:
        """The :class:`~odradek.storage.writes.WriteSink` of one partition's log."""
        return _Sink(self, key)

    def submit(self, key: K, job: AppendJob) -> None:
        with self._lock:
            if self._stopping:
                raise RuntimeError("the log writer is stopped")
            strand = self._strands.get(key)
            if strand is None:
                strand = self._strands[key] = _Strand(key)
            strand.jobs.append(job)
            strand.streams.add(job.stream)
            if not strand.scheduled:
                strand.scheduled = True
                self._ready.append(strand)
                self._notify()

    def _notify(self) -> None:
        """Wake one idle thread per ready strand, no more (waking costs the GIL)."""
        if self._idle > self._woken and len(self._ready) > self._woken:
            self._woken += 1
            self._wake.notify()

    def forget(self, key: K) -> None:
        """The partition is gone (its log closed, so nothing of it is queued)."""
        with self._lock:
            strand = self._strands.get(key)
            if strand is not None and not strand.scheduled and not strand.jobs:
                del self._strands[key]

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._ready and not self._stopping:
                    self._idle += 1
                    self._wake.wait()
                    self._idle -= 1
                    self._woken = max(self._woken - 1, 0)
                if not self._ready:
                    return
                # Every strand ready now, up to a budget: one wake-up and one
                # callback for the partitions of a produce request, not one each.
                # A stalled write delays only the strands taken with it; those
                # readied later go to other threads.
                turn: list[tuple[_Strand[K], list[AppendJob]]] = []
                budget = MAX_JOBS_PER_TURN
                while self._ready and budget > 0:
                    strand = self._ready.popleft()
                    jobs: list[AppendJob] = []
                    while strand.jobs and len(jobs) < budget:
                        jobs.append(strand.jobs.popleft())
                    budget -= len(jobs)
                    turn.append((strand, jobs))
            for _, jobs in turn:
                run_jobs(jobs)  # back-to-back jobs in one pwritev; errors stay on the jobs
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                self._loop.call_soon_threadsafe(
                    self._on_done, [(strand.key, jobs) for strand, jobs in turn])
            with self._lock:
                for strand, _ in turn:
                    if strand.jobs:
                        self._ready.append(strand)
                        self._notify()
                    else:
                        for stream in strand.streams:
                            stream.release()
                        strand.streams.clear()
                        strand.scheduled = False

    def stop(self) -> None:
        """Finish what is queued, then end the threads (blocking)."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
        for t in self._threads:
            t.join()


@dataclass(frozen=True, slots=True)
class _Sink(Generic[K]):
    writer: LogWriter[K]
    key: K

    def submit(self, job: AppendJob) -> None:
        self.writer.submit(self.key, job)

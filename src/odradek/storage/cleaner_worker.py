"""The worker process a cleaner pass runs in (``log.cleaner.threads``).

On the operating system's files a pass (:func:`~odradek.storage.cleaner_pass.run_pass`)
runs in a ``spawn``-ed worker process: decoding records is CPU work that would
otherwise hold the broker's interpreter lock. Its arguments and result are
plain picklable values (:class:`~odradek.storage.cleaner_io.SegmentFile`,
:class:`~odradek.storage.cleaner_pass.PassResult`). A worker whose broker is
gone (kill -9) stops at its next check
(:func:`~odradek.storage.cleaner_io.check_parent`), and never writes a
``.cleaned`` file that already exists. Closing the pool kills the worker at
once; the ``.cleaned`` file of a pass cut short is removed by the next
start-up (:mod:`odradek.storage.loader`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os

from odradek.storage.cleaner_io import watch_parent
from odradek.storage.cleaner_pass import PassResult, run_pass


def _run_pass_in_worker(parent: int, *args: object) -> PassResult:
    """:func:`run_pass` in a worker process, on the operating system's files."""
    from odradek.storage.fs import OsFileSystem

    watch_parent(parent)
    return run_pass(OsFileSystem(), *args)  # type: ignore[arg-type]


class CleanerStopped(Exception):
    """The broker is stopping: the pass was abandoned."""


class CleanerPool:
    """The worker process that runs passes (``log.cleaner.threads``): decoding and
    rewriting records is CPU work, and in a process of its own it does not hold
    the broker's interpreter lock while requests are served."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(workers, 1)
        self._pool: multiprocessing.pool.Pool | None = None
        self._closed = False

    def submit(self, *args: object) -> PassResult:
        """Run a pass in the worker and wait for it (from a thread, not the loop)."""
        pool = self._pool
        if pool is None:
            if self._closed:
                raise CleanerStopped("the cleaner is stopped")
            pool = self._pool = multiprocessing.get_context("spawn").Pool(self.workers)
        pending = pool.apply_async(_run_pass_in_worker, (os.getpid(), *args))
        while True:
            try:
                result: PassResult = pending.get(timeout=0.2)
                return result
            except multiprocessing.TimeoutError:
                if self._closed:
                    raise CleanerStopped("the cleaner stopped during a pass") from None

    def close(self) -> None:
        """Stop the worker at once (a pass under way leaves a ``.cleaned`` file that
        the next start-up removes)."""
        self._closed = True
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

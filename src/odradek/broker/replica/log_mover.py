"""Moving partitions between log directories while they are served (AlterReplicaLogDirs).

Kafka's ReplicaAlterLogDirsThread, as asyncio tasks: one task per moving
partition, at most ``num.replica.alter.log.dirs.threads`` copying at once
(Kafka's default: the number of log directories). A move:

1. creates ``<topic>-<partition>.<hex>-future`` in the target directory
   (:meth:`LogManager.create_future_log`) and attaches it to the partition's
   state machine as its future replica;
2. copies the current log into it in rounds of up to :data:`CHUNK_BYTES`
   (:mod:`odradek.replication.future`): the ranges are planned on the event
   loop, read and appended on a worker thread, and appends that arrive
   meanwhile are picked up by the next round;
3. once caught up, fsyncs the copy on a worker thread, then on the event loop,
   with no await until it is done (the partition's lock, in Kafka's terms:
   no produce, fetch or flush interleaves), waits for the current log's
   appends still being written (on the writer threads: the copy
   never reads past the written end, so they would be lost in the swap),
   copies the last few batches,
   fsyncs the copy if the current log was synced further, and renames it in
   (:meth:`LogManager.promote_future`, the on-disk steps in
   :mod:`odradek.storage.logdirs`). The old directory is deleted after
   ``file.delete.delay.ms``. A flush of the current log in flight, or a
   cleaner pass over it, is waited out first.

A request naming another directory while a move runs gives the running move
up (its future log is deleted) and starts the new one; naming the current
directory just gives it up. A move found on disk at start-up (a future log
beside the current one) resumes from the copy's end. A storage error while
copying gives the move up, logged; the partition keeps being served from its
current log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.aio import cancel_and_wait
from odradek.common import crashpoints
from odradek.replication.future import FutureReplica
from odradek.storage.errors import StorageError

if TYPE_CHECKING:
    from odradek.replication.partition import PartitionState
    from odradek.storage.fs import FileSystem
    from odradek.storage.manager import LogManager


class Partition(Protocol):
    """What a move reads of a partition (the replica manager's ``Partition``)."""

    @property
    def topic(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def state(self) -> PartitionState: ...


class MoverHost(Protocol):
    """What a move needs of the replica manager (``PartitionManager``): its log
    manager and file system, and the partition's writes, flushes and swap."""

    @property
    def logs(self) -> LogManager: ...

    @property
    def fs(self) -> FileSystem: ...

    def flushing(self, part: Any) -> asyncio.Future[None] | None: ...

    async def writes_done(self, part: Any) -> None: ...

    def promote_future(self, part: Any) -> None: ...

log = logging.getLogger("odradek.broker")

CHUNK_BYTES = 1 << 20
"""Bytes one round of the copy reads and appends on a worker thread."""
FINAL_BYTES = 256 << 10
"""What the final step may still copy on the event loop; more takes another round."""
WRITE_WAITS = 4
"""Times the final step waits (without blocking) for the current log's pending
writes to complete before it drains the rest on the event loop."""


class LogMover:
    """The moves of one broker (see the module docstring)."""

    def __init__(self, manager: MoverHost, threads: int,
                 max_bytes_per_second: float = float("inf")) -> None:
        self.manager = manager
        self.max_bytes_per_second = max_bytes_per_second
        """``replica.alter.log.dirs.io.max.bytes.per.second``: each move copies at most
        this fast (Kafka's throttle of its ReplicaAlterLogDirsThreads)."""
        self._slots = asyncio.Semaphore(max(threads, 1))
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._busy: set[FutureReplica] = set()
        """Future replicas a worker thread is writing to: closed by their task."""
        self._orphans: set[FutureReplica] = set()
        self.completed = 0
        self.last_swap_ms = 0.0
        """How long the last move's final step held the event loop (copy of the last
        batches, fsync if needed, the renames)."""

    def alter(self, part: Partition, directory: str) -> None:
        """Move ``part`` to ``directory`` (one of ``log.dirs``), as AlterReplicaLogDirs
        asks: nothing if it is there and not moving, give up a move elsewhere, and
        start one unless it is already moving there."""
        logs = self.manager.logs
        future = part.state.future
        if future is not None and future.log.parent_dir != directory:
            self.cancel(part)
            future = None
        if future is not None or logs.dir_of(part.topic, part.index) == directory:
            return
        flog = logs.create_future_log(part.topic, part.index, directory)
        self.start(part, part.state.attach_future(flog))
        log.info("%s-%d: moving to log directory %s", part.topic, part.index, directory)

    def start(self, part: Partition, future: FutureReplica) -> None:
        """Run the copy of ``future`` (new, or found on disk at start-up)."""
        key = (part.topic, part.index)
        self._tasks[key] = asyncio.get_running_loop().create_task(self._run(part, future))

    def cancel(self, part: Partition) -> None:
        """Give up the partition's move: its future log is renamed for deletion now and
        closed once no worker thread writes to it."""
        future = part.state.detach_future()
        if future is None:
            return
        self.manager.logs.drop_future(part.topic, part.index)
        self._close_unless_busy(future)

    def _close_unless_busy(self, future: FutureReplica) -> None:
        if future in self._busy:
            self._orphans.add(future)  # its task closes it when the thread returns
            return
        with contextlib.suppress(StorageError, OSError):
            future.log.close()
        future.log.handles.close_all()

    async def _in_thread(self, future: FutureReplica, fn: Callable[..., object],
                         *args: object) -> None:
        """Run ``fn(*args)`` on a worker thread; ``future`` counts as busy until the
        thread returns, even if this task is cancelled first."""
        thread = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        self._busy.add(future)

        def done(finished: asyncio.Future[object]) -> None:
            if not finished.cancelled():
                finished.exception()  # retrieved here if the task was cancelled
            self._busy.discard(future)
            if future in self._orphans:
                self._orphans.discard(future)
                self._close_unless_busy(future)

        thread.add_done_callback(done)
        await asyncio.shield(thread)

    async def _run(self, part: Partition, future: FutureReplica) -> None:
        state = part.state
        key = (part.topic, part.index)
        loop = asyncio.get_running_loop()
        rate = self.max_bytes_per_second
        chunk = int(min(CHUNK_BYTES, max(rate / 10, 4096)))
        try:
            async with self._slots:
                began, copied = loop.time(), future.copied_bytes
                while state.future is future:
                    plan = future.plan(state.log, chunk)
                    if plan is not None:
                        await self._in_thread(future, future.copy, plan, self.manager.fs)
                        if state.future is future:
                            future.copied(state.log)
                            crashpoints.reach("logdir.copying")
                        ahead = (future.copied_bytes - copied) / rate - (loop.time() - began)
                        if ahead > 0:
                            await asyncio.sleep(ahead)
                        continue
                    await self._in_thread(future, future.sync, state.log.epochs.entries)
                    if state.future is not future:
                        break
                    if await self._wait_quiet(part):
                        continue  # something ran meanwhile: look again
                    held = loop.time()
                    # Appends assigned since the wait (writer threads) are written
                    # now, blocking: the copy must hold them before the swap, and
                    # the old log's files are renamed away right after.
                    state.log.drain_writes()
                    if future.finish(state.log, FINAL_BYTES):
                        crashpoints.reach("logdir.before_decide")
                        self.manager.promote_future(part)
                        self.completed += 1
                        self.last_swap_ms = (loop.time() - held) * 1000
                        log.info("%s-%d: moved to log directory %s (%d bytes copied; the "
                                 "final step held the event loop %.1f ms)", part.topic,
                                 part.index, state.log.parent_dir, future.copied_bytes,
                                 self.last_swap_ms)
                        return
        except (StorageError, OSError) as exc:
            log.warning("%s-%d: moving to another log directory failed, given up (the "
                        "partition stays where it is): %s", part.topic, part.index, exc)
            if state.future is future:
                self.cancel(part)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    async def _wait_quiet(self, part: Partition) -> bool:
        """Wait out a flush of the current log in flight and a cleaner pass over it;
        True when it had to wait (the caller looks again). Appends still being
        written (writer threads) are waited for too, a few times at most: the
        caller drains what is left, blocking, before the final step."""
        waited = False
        write_waits = 0
        while True:
            running = self.manager.flushing(part)
            cleaning = self.manager.logs.cleaning
            if running is not None:
                await asyncio.shield(running)
            elif cleaning is not None and cleaning.log is part.state.log:
                await asyncio.sleep(0.05)
            elif part.state.log.writes_pending and write_waits < WRITE_WAITS:
                write_waits += 1
                await self.manager.writes_done(part)
                continue
            else:
                return waited
            waited = True

    def moving(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Stop every copy (their future logs stay on disk: the next start resumes
        them) and wait for the worker threads."""
        await cancel_and_wait(*self._tasks.values())
        while self._busy:
            await asyncio.sleep(0.01)

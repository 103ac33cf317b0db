"""The coordinator runtime: one IO shell driving coordinator shards over their partitions.

A coordinator (the group coordinator on ``__consumer_offsets``, the
transaction coordinator on ``__transaction_state``, a share coordinator
later) is a pure state machine whose state is the replay of the records of
its internal topic: a :class:`~odradek.broker.coordinators.shard.CoordinatorShard`.
Everything else is written once, here, after the shape of Kafka's
``CoordinatorRuntime``:

* **the internal topic**: :meth:`CoordinatorRuntime.ensure_topic`;
* **load**: a partition this broker leads (at start, or when it becomes its
  leader) is replayed from its log start to its log end in chunks of
  ``load_chunk_bytes``, yielding to the event loop between chunks. Meanwhile
  it is *loading*: the shard holds its requests and
  :meth:`CoordinatorRuntime.write` refuses it (:class:`CoordinatorLoadingError`);
* **unload**: a partition whose leadership moved away is dropped, and a load
  in flight for it stops;
* **write → replay → committed**: :meth:`CoordinatorRuntime.write` appends one
  batch and replays its records into the shard with nothing in between, so the
  state follows the log's order; :meth:`CoordinatorRuntime.committed` waits
  until it is committed (:mod:`~odradek.broker.coordinators.committed`), and
  only then may the request be answered;
* **reload**: a write that fails while this broker still leads the partition,
  with records in its log not yet committed, drops the partition's state and
  loads it again once the log is committed to its end (what never committed is
  left out);
* **timers**: :class:`~odradek.broker.coordinators.timers.Timers`, one task;
* **metadata**: :meth:`CoordinatorRuntime.on_metadata` hands a new image to the shard.

The runtime reaches partitions only through :class:`PartitionWriter`
(:class:`~odradek.broker.coordinators.partition_writer.PartitionManagerWriter`
over the replica wing; an in-memory one in the tests). A marker another
coordinator writes to one of its partitions (the transaction coordinator's
COMMIT/ABORT in ``__consumer_offsets``) is told with
:meth:`CoordinatorRuntime.note_marker`: replayed at once, or, while the
partition loads, after the load if the load did not read it.

Invariants: a partition is in at most one of loading, loaded, unloaded; each
load carries an epoch and stops as soon as a newer load, an unload or close
supersedes it; records are replayed in offset order; nothing is written to a
loading partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from odradek.broker.aio import cancel_and_wait
from odradek.broker.coordinators.committed import Commits
from odradek.broker.coordinators.internal_topic import Metadata, ensure_internal_topic
from odradek.broker.coordinators.shard import CoordinatorShard, Entry, Marker
from odradek.broker.coordinators.timers import Fire, Timers
from odradek.broker.ports import CoordinatorWriteError
from odradek.common.clock import Clock
from odradek.metadata.image import MetadataImage, TopicImage
from odradek.storage.errors import CorruptRecordError
from odradek.wire.batch import NO_PRODUCER_ID
from odradek.wire.primitives import DecodeError

__all__ = [
    "CoordinatorLoadingError", "CoordinatorRuntime", "CoordinatorShard", "Entry", "Marker",
    "Metadata", "PartitionWriter", "ReadChunk", "Written", "routine",
]

log = logging.getLogger("odradek.coordinators")
LOAD_CHUNK_BYTES = 1 << 20
RELOAD_WAIT_S = 5.0
LOAD_ATTEMPTS = 3
"""How many times a load meets records it cannot decode before it gives up on them."""
LOAD_RETRY_S = 0.1
"""The pause before a failed load starts again (doubling, at most 2 s)."""
"""How long a reload waits at a time for the log to be committed to its end."""

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ReadChunk:
    """Records of a partition from some offset on, in offset order."""

    records: list[Entry | Marker]
    next_offset: int
    """Where the next read starts (past every batch read, empty ones too)."""
    error: Exception | None = None
    """Why the read stopped short (an unreadable batch): ``records`` are what came before."""


@dataclass(frozen=True, slots=True)
class Written:
    """A batch appended to a coordinator partition, not yet known to be committed."""

    index: int
    first_offset: int
    last_offset: int
    handle: Any = None
    """The port's own handle, for :meth:`PartitionWriter.completed`."""

    @property
    def end(self) -> int:
        return self.last_offset + 1


class CoordinatorLoadingError(CoordinatorWriteError):
    """A write to a partition whose state is being loaded (or loaded again)."""


def routine(exc: CoordinatorWriteError) -> bool:
    """A write failure that is routine in a cluster (the leadership moved, or the
    partition is loading): the client finds its coordinator again and retries."""
    return isinstance(exc, CoordinatorLoadingError) or "moved" in str(exc)


class PartitionWriter(Protocol):
    """What the runtime needs of a coordinator topic's partitions, by index."""

    def is_leader(self, index: int) -> bool:
        """This broker hosts and leads the partition."""
        ...

    def leader_epoch(self, index: int) -> int: ...

    def log_start(self, index: int) -> int: ...

    def log_end(self, index: int) -> int | None:
        """The written log end; None when the partition is not hosted here."""
        ...

    def high_watermark(self, index: int) -> int | None: ...

    def read(self, index: int, offset: int, max_bytes: int) -> ReadChunk: ...

    def append(
        self, index: int, records: Sequence[tuple[bytes | None, bytes | None]], now_ms: int,
        *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
        base_sequence: int = -1, transactional: bool = False,
    ) -> Written:
        """Append ``records`` as one batch with the coordinator origin. Raises
        CoordinatorWriteError if the partition is missing or refuses it."""
        ...

    async def completed(self, written: Written) -> None:
        """Return once ``written`` is written, fsynced where due and below the HW.
        Raises CoordinatorWriteError (the write failed, the leadership moved)."""
        ...

    async def wait_for_high_watermark(self, index: int, offset: int) -> None:
        """Return once the HW is past ``offset``. Raises CoordinatorWriteError when
        the partition goes or this broker stops leading it."""
        ...


class Status(Enum):
    LOADING = "loading"
    LOADED = "loaded"
    UNLOADED = "unloaded"


class CoordinatorRuntime(Generic[R]):
    """One coordinator's runtime: its ``topic``'s partitions, its shard, its timers."""

    def __init__(
        self, topic: str, num_partitions: int, writer: PartitionWriter,
        shard: CoordinatorShard[R], metadata: Metadata, clock: Clock,
        *, load_chunk_bytes: int = LOAD_CHUNK_BYTES, load_retry_s: float = LOAD_RETRY_S,
    ) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.writer = writer
        self.shard = shard
        self.metadata = metadata
        self.clock = clock
        self.load_chunk_bytes = load_chunk_bytes
        self.load_retry_s = load_retry_s
        self.started = False
        self.closing = False
        self.loaded = asyncio.Event()
        """Set once the loads begun by :meth:`start` are done."""
        self.commits = Commits(topic, writer)
        self.timers = Timers(clock, self.spawn)
        self._status: dict[int, Status] = {}
        self._epoch: dict[int, int] = {}
        self._deferred: dict[int, list[Marker]] = {}
        self._topic_at_start = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer_task: asyncio.Task[None] | None = None

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the timers and load every partition this broker leads (in the
        background); the others are unloaded. Without the topic every partition
        is served empty until it exists."""
        self.started = True
        self._timer_task = asyncio.get_running_loop().create_task(self.timers.run())
        topic = self.metadata.image.topics.get(self.topic)
        self._topic_at_start = topic is not None
        if topic is None:
            for index in self._indexes(None):
                self._set_loaded(index)
            self.loaded.set()
            return
        plan = []
        for index in self._indexes(topic):
            if self.writer.is_leader(index):
                plan.append((index, self._begin_load(index)))
            elif index in topic.partitions:
                self._unload(index)
            else:  # (configured, but not in the topic: nothing to replay)
                self._set_loaded(index)
        self.spawn(self._load_all(plan))

    async def _load_all(self, plan: list[tuple[int, int]]) -> None:
        try:
            for index, epoch in plan:
                await self._load(index, epoch)
        finally:
            self.loaded.set()

    def _indexes(self, topic: TopicImage | None) -> list[int]:
        indexes = set(range(self.num_partitions))
        if topic is not None:
            indexes |= set(topic.partitions)
        return sorted(indexes)

    async def ensure_topic(self, configs: Mapping[str, str], replication_factor: int = -1,
                           ) -> bool:
        """Create the topic if it does not exist; True when it does. Created after
        :meth:`start`, its partitions are new and empty: those led here are
        served at once, the others are another broker's."""
        if self.topic in self.metadata.image.topics:
            return True
        if not await ensure_internal_topic(self.metadata, self.topic, self.num_partitions,
                                           configs, replication_factor):
            return False
        # Before start() (a cluster node still replaying the metadata log, where
        # the topic "appears" as the replay reaches it) nothing changes here:
        # start() loads what this broker leads, and until then requests wait.
        topic = self.metadata.image.topics.get(self.topic)
        if self.started and not self._topic_at_start and topic is not None:
            for index in self._indexes(topic):
                if index in topic.partitions and not self.writer.is_leader(index):
                    self._unload(index)
                else:
                    self._set_loaded(index)
        return True

    def leadership_changed(self, indexes: Iterable[int]) -> None:
        """Partitions of the topic whose leader changed (cluster mode): those this
        broker now leads are loaded, the others unloaded."""
        if not self.started:
            return
        for index in indexes:
            if self.writer.is_leader(index):
                self.spawn(self._load(index, self._begin_load(index)))
            elif self._status.get(index) is not Status.UNLOADED:
                log.info("%s-%d: no longer led here; unloaded", self.topic, index)
                self._unload(index)

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image: the shard's to look at."""
        self.shard.on_metadata(image)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as a task of this runtime (cancelled by :meth:`close`)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s: a coordinator task failed", self.topic, exc_info=exc)

    def schedule(self, key: str, deadline_ms: int, fire: Fire) -> None:
        """Run ``fire`` at ``deadline_ms`` (see :class:`Timers`)."""
        self.timers.schedule(key, deadline_ms, fire)

    async def close(self) -> None:
        """Stop the timers, the loads and every task. Writes still waiting for
        their commit (one that cannot come once the other replicas are gone) are
        not waited for: nothing was answered for them, and the log keeps them."""
        self.closing = True
        await cancel_and_wait(self._timer_task)
        while pending := [t for t in self._tasks if not t.done()]:
            await cancel_and_wait(*pending)

    # -- partition states ---------------------------------------------------------------

    def leads(self, index: int) -> bool:
        return self.writer.is_leader(index)

    def is_loading(self, index: int) -> bool:
        return self._status.get(index) is Status.LOADING

    def _new_epoch(self, index: int, status: Status) -> int:
        epoch = self._epoch[index] = self._epoch.get(index, 0) + 1
        self._status[index] = status
        self._deferred.pop(index, None)
        return epoch

    def _begin_load(self, index: int) -> int:
        epoch = self._new_epoch(index, Status.LOADING)
        self.shard.on_loading(index)
        return epoch

    def _set_loaded(self, index: int) -> None:
        """Nothing to replay for ``index`` (new, or not hosted): serve it as it is."""
        self._new_epoch(index, Status.LOADED)
        self.shard.on_loaded(index)

    def _unload(self, index: int) -> None:
        self._new_epoch(index, Status.UNLOADED)
        self.shard.on_unloaded(index)

    def _current(self, index: int, epoch: int) -> bool:
        return (not self.closing and self._epoch.get(index) == epoch
                and self._status.get(index) is Status.LOADING)

    # -- loading ------------------------------------------------------------------------

    async def _load(self, index: int, epoch: int) -> None:
        """Replay ``index`` from its log start to its log end, a chunk at a time
        (other tasks run in between), then serve it.

        A read that fails (the log truncated or its start moved under the load, an
        IO error) starts the load again from the log start after a pause, for as
        long as this load is current: the partition stays loading (clients are
        told to retry) rather than serving a state missing what came after the
        failure. Only records that stay unreadable (a corrupt batch, the same one
        :data:`LOAD_ATTEMPTS` times) are given up on, and what came before them
        is served, with an error in the log."""
        await asyncio.sleep(0)
        attempt = 0
        while True:
            attempt += 1
            try:
                offset, records, error = await self._replay_log(index, epoch)
            except Exception as exc:  # any failure: try again, never stay loading forever
                offset, records, error = -1, 0, exc
            if not self._current(index, epoch):
                return  # superseded: unloaded, loaded again, or closing
            if error is None:
                break
            if _permanent(error) and attempt >= LOAD_ATTEMPTS:
                log.error("%s-%d: records at offset %d stay unreadable (%s); loaded what "
                          "came before", self.topic, index, offset, error)
                break
            log.warning("%s-%d: loading failed at offset %d (%s); loading again",
                        self.topic, index, offset, error)
            self.shard.on_loading(index)  # drop what the failed attempt replayed
            self._deferred.pop(index, None)
            await asyncio.sleep(min(self.load_retry_s * 2 ** (attempt - 1), 2.0))
            if not self._current(index, epoch):
                return
        self._status[index] = Status.LOADED
        self.shard.on_loaded(index)
        for marker in self._deferred.pop(index, ()):
            if marker.offset >= offset:  # (appended during the load, not read by it)
                self.shard.replay_marker(index, marker.producer_id, marker.committed,
                                         marker.offset)
        log.info("%s-%d: loaded (%d records)", self.topic, index, records)

    async def _replay_log(self, index: int, epoch: int
                          ) -> tuple[int, int, Exception | None]:
        """One pass of a load: (the offset reached, records replayed, the error
        that stopped it or None)."""
        offset = self.writer.log_start(index)
        records = 0
        while self._current(index, epoch):
            end = self.writer.log_end(index)
            if end is None or offset >= end:
                break
            chunk = self.writer.read(index, offset, self.load_chunk_bytes)
            for record in chunk.records:
                self._replay(index, record)
            records += len(chunk.records)
            if chunk.error is not None:
                return chunk.next_offset, records, chunk.error
            if chunk.next_offset <= offset:
                break
            offset = chunk.next_offset
            await asyncio.sleep(0)  # let requests in between chunks
        return offset, records, None

    def _replay(self, index: int, record: Entry | Marker) -> None:
        if isinstance(record, Marker):
            self.shard.replay_marker(index, record.producer_id, record.committed, record.offset)
            return
        try:
            decoded = self.shard.decode(record.key, record.value)
        except DecodeError:
            log.warning("%s-%d offset %d: not a record of this coordinator; skipped",
                        self.topic, index, record.offset)
            return
        if decoded is not None:
            self.shard.replay(index, record.offset, record.producer_id, record.producer_epoch,
                              decoded)

    def reload_if_diverged(self, index: int) -> None:
        """A write to ``index`` failed. If this broker still leads it and the log
        holds records not yet committed, the state may hold what will never
        commit: drop it (requests wait) and load it again from the log once the
        log is committed to its end."""
        if (self.is_loading(index) or not self.writer.is_leader(index)
                or self.is_settled(index)):
            return
        log.warning("%s-%d: a write failed; its state is loaded again from the committed log",
                    self.topic, index)
        self.spawn(self._reload(index, self._begin_load(index)))

    async def _reload(self, index: int, epoch: int) -> None:
        while self._current(index, epoch):
            if await self.log_committed(index, RELOAD_WAIT_S):
                await self._load(index, epoch)
                return
            if not self.writer.is_leader(index):
                return  # leadership_changed unloads it

    # -- writing ------------------------------------------------------------------------

    def write(self, index: int, records: Sequence[R], *, producer_id: int = NO_PRODUCER_ID,
              producer_epoch: int = -1, transactional: bool = False) -> Written:
        """Append ``records`` as one batch to ``index`` and replay them into the
        shard, with nothing in between. Raises CoordinatorWriteError (nothing
        appended, nothing replayed)."""
        if self.is_loading(index):
            raise CoordinatorLoadingError(f"{self.topic}-{index} is loading")
        try:
            written = self.writer.append(
                index, [self.shard.encode(r) for r in records], self.clock.now_ms(),
                producer_id=producer_id, producer_epoch=producer_epoch,
                transactional=transactional)
        except CoordinatorWriteError:
            self.reload_if_diverged(index)
            raise
        self.commits.wrote(index, written.end)
        for i, record in enumerate(records):
            self.shard.replay(index, written.first_offset + i, producer_id, producer_epoch,
                              record)
        return written

    async def committed(self, written: Sequence[Written], timeout_s: float | None = None,
                        ) -> None:
        """Wait until every batch is committed (:meth:`Commits.completed`). Raises
        CoordinatorWriteError; the partitions whose state may then hold what
        never commits are reloaded."""
        try:
            await self.commits.completed(written, timeout_s)
        except CoordinatorWriteError:
            for w in written:
                self.reload_if_diverged(w.index)
            raise

    def note_marker(self, index: int, producer_id: int, commit: bool, end: int) -> None:
        """Another coordinator appended ``producer_id``'s marker to ``index``, ending
        at ``end``: replayed now, or after a load in progress if it did not read it."""
        self.commits.wrote(index, end)
        if self.is_loading(index):
            self._deferred.setdefault(index, []).append(Marker(end - 1, producer_id, -1, commit))
            return
        self.shard.replay_marker(index, producer_id, commit, end - 1)

    # -- what is committed --------------------------------------------------------------

    @property
    def written_end(self) -> dict[int, int]:
        return self.commits.written_end

    def is_settled(self, index: int) -> bool:
        return self.commits.is_settled(index)

    async def settled(self, index: int, timeout_s: float) -> bool:
        return await self.commits.settled(index, timeout_s)

    async def log_committed(self, index: int, timeout_s: float) -> bool:
        return await self.commits.log_committed(index, timeout_s)

    async def settled_all(self, timeout_s: float) -> bool:
        """:meth:`settled` for every loaded partition hosted here; False also while
        a partition loads."""
        for index in sorted(self._status):
            if (self._status[index] is Status.LOADED and self.writer.log_end(index) is not None
                    and not self.is_settled(index)
                    and not await self.settled(index, timeout_s)):
                return False
        return not any(s is Status.LOADING for s in self._status.values())


def _permanent(error: Exception) -> bool:
    """Records that will read the same way again (a corrupt or undecodable batch),
    as opposed to a log that changed under the read or an IO error."""
    return isinstance(error, (DecodeError, CorruptRecordError))

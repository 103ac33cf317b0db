"""The replica manager shell: the partitions this node hosts and their waiters.

:class:`PartitionManager` keeps one :class:`Partition` per partition of the
metadata image, opening (or creating) its log under ``log.dirs`` and deleting
the logs of removed topics. Each :class:`Partition` wraps the pure
:class:`~odradek.replication.partition.PartitionState` (log, producer state,
leader epoch, replicas, ISR, high watermark) and adds what needs the event
loop: fetches long-polling it, produces and coordinator writes waiting for its
high watermark (delayed produce), and fsyncs on a worker thread.

With ``odradek.log.writer.threads`` > 0 appends are written off the loop
(:mod:`odradek.broker.replica.writer`; 0, the default, writes them on it): offsets are
assigned at once, the bytes go to a writer thread, and the log end offset,
the HW and waiting fetches move when the write completes; an answer that
needs the records in the log (acks=1 and -1, a coordinator's write) waits for
it and carries its failure (KAFKA_STORAGE_ERROR).

Durability at ack time (see docs/durability.md): an append is in the page
cache when Produce answers; if ``flush.messages`` is reached by the append the
answer waits for the fsync, which runs on a worker thread and covers every
append made before it started (group commit). An ``acks=-1`` append also waits
until the HW passes its last offset: on one node that is at once (the ISR is
this node), in a cluster once the ISR has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from odradek.broker.aio import cancel_and_wait
from odradek.broker.ports import (
    METADATA_TOPIC,
    BrokerStopping,
    NotLeaderError,
    PartitionGoneError,
)
from odradek.broker.replica.log_mover import LogMover
from odradek.broker.replica.writer import LogWriter
from odradek.common.clock import Clock
from odradek.common.ids import Ids
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.replication.effects import Changed, hw_change
from odradek.replication.partition import Appended, IsrChangeCounts, Origin, PartitionState
from odradek.storage.checkpoint import kafka_uuid_string
from odradek.storage.config import LogConfig, LogManagerConfig, log_config_from_server
from odradek.storage.epochs import deferred_writes
from odradek.storage.errors import StorageError
from odradek.storage.flush import FlushJob, IoJob
from odradek.storage.fs import FileSystem, OsFileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.storage.writes import AppendJob

log = logging.getLogger("odradek.broker")



_NO_POLLS: frozenset[asyncio.Future[None]] = frozenset()
"""The long polls of a partition nobody waits on: shared, so an idle partition
holds no set of its own (an empty set costs 216 bytes)."""
_NO_HW_WAITS: tuple[()] = ()


def _wake(futures: AbstractSet[asyncio.Future[None]]) -> None:
    """Resolve every long poll parked in ``futures`` (the caller forgets them)."""
    for fut in futures:
        if not fut.done():
            fut.set_result(None)


@dataclass(slots=True, eq=False)
class Partition:
    """The shell around one :class:`PartitionState`: fetches long-polling it and
    produces waiting for its high watermark (delayed produce)."""

    state: PartitionState
    waiters: AbstractSet[asyncio.Future[None]] = _NO_POLLS
    """Followers' long polls: woken when records are appended (readable) or the
    HW moves. The shared empty frozenset while none waits (:meth:`park`)."""
    readers: AbstractSet[asyncio.Future[None]] = _NO_POLLS
    """Consumers' long polls: woken only when the HW moves (or the partition
    changes hands), since a consumer reads no further than the HW; woken at
    every append as well, each parked consumer collected one fetch for nothing
    per record."""
    hw_waiters: list[tuple[int, asyncio.Future[None]]] | tuple[()] = _NO_HW_WAITS
    """(offset, future): resolved once the HW is past ``offset`` (the shared
    empty tuple while none waits)."""
    refused: dict[int, tuple[int, int, int]] | None = None
    """producer id -> (epoch, first sequence, error code) of its last batch this
    leader refused with a retriable error before the sequence check (see
    ``handlers/k00_produce.py``); dropped when the producer's next batch is
    taken. None until the first refusal (an idle partition holds no dict)."""

    @property
    def topic(self) -> str:
        return self.state.topic

    @property
    def index(self) -> int:
        return self.state.index

    @property
    def log(self) -> Log:
        """The partition's log, for reads and inspection; appends and the HW go
        through :attr:`state`."""
        return self.state.log

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def park(self, fut: asyncio.Future[None], follower: bool) -> None:
        """``fut`` long-polls this partition (a follower's fetch, else a consumer's)
        until :meth:`notify` (or :meth:`unpark`)."""
        polls = self.waiters if follower else self.readers
        if not isinstance(polls, set):
            polls = set()
            if follower:
                self.waiters = polls
            else:
                self.readers = polls
        polls.add(fut)

    def unpark(self, fut: asyncio.Future[None], follower: bool) -> None:
        """``fut`` no longer waits here (it was woken, or timed out)."""
        polls = self.waiters if follower else self.readers
        if isinstance(polls, set) and fut in polls:
            polls.discard(fut)
            if not polls:
                if follower:
                    self.waiters = _NO_POLLS
                else:
                    self.readers = _NO_POLLS

    def notify(self) -> None:
        """Wake every fetch long-polling this partition."""
        if self.waiters:
            waiters, self.waiters = self.waiters, _NO_POLLS
            _wake(waiters)
        if self.readers:
            readers, self.readers = self.readers, _NO_POLLS
            _wake(readers)

    def notify_followers(self) -> None:
        """Records were appended (the HW did not move): wake the followers' long
        polls only."""
        if self.waiters:
            waiters, self.waiters = self.waiters, _NO_POLLS
            _wake(waiters)

    def hw_moved(self) -> None:
        """The HW moved: wake fetches, and complete the waits it now covers."""
        self.notify()
        if self.hw_waiters:
            hw = self.state.high_watermark
            keep = []
            for offset, fut in self.hw_waiters:
                if offset >= hw:
                    keep.append((offset, fut))
                elif not fut.done():
                    fut.set_result(None)
            self.hw_waiters = keep or _NO_HW_WAITS

    async def wait_for_high_watermark(self, offset: int, leader_epoch: int = -1) -> None:
        """Return once the HW is past ``offset`` (an acks=all produce, a coordinator's
        records): on one node at once, in a cluster when the ISR has caught up.
        Raises PartitionGoneError if the partition is removed first, NotLeaderError
        if this replica no longer leads at ``leader_epoch`` (the epoch of the
        append; -1: any). The check is made here, not only by
        :meth:`leadership_lost`: a waiter registered after the leadership moved
        (the append's answer is awaited in another task, or after an fsync) would
        otherwise be completed by a later HW, at a later leadership, whose log
        may hold other records at those offsets."""
        if not self.state.is_leader or (
                leader_epoch >= 0 and self.state.leader_epoch != leader_epoch):
            raise NotLeaderError(f"{self.topic}-{self.index} moved")
        if offset < self.state.high_watermark:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waits = self.hw_waiters
        if not isinstance(waits, list):
            waits = self.hw_waiters = []
        waits.append((offset, fut))
        await fut

    def leadership_lost(self) -> None:
        """This replica stopped leading: waits for its HW can no longer be answered
        here (the client retries at the new leader), and long polls return."""
        self.notify()
        for _, fut in self.hw_waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError(f"{self.topic}-{self.index} moved"))
        self.hw_waiters = _NO_HW_WAITS

    def abandon(self) -> None:
        """The partition goes (deleted): release every waiter."""
        self.notify()
        for _, fut in self.hw_waiters:
            if not fut.done():
                fut.set_exception(PartitionGoneError(f"{self.topic}-{self.index} is gone"))
        self.hw_waiters = _NO_HW_WAITS

    def stopping(self) -> None:
        """The broker stops: every wait for the HW ends with :class:`BrokerStopping`
        (a produce is then not answered: see the class), and long polls return."""
        self.notify()
        for _, fut in self.hw_waiters:
            if not fut.done():
                fut.set_exception(BrokerStopping(f"{self.topic}-{self.index}: the broker stops"))
        self.hw_waiters = _NO_HW_WAITS


class PartitionManager:
    """The broker's view of the log directory, on top of storage's LogManager."""

    def __init__(
        self, log_dirs: str | Sequence[str], server_props: dict[str, str], clock: Clock,
        fs: FileSystem | None = None, *, node_id: int = 1, ids: Ids | None = None,
        foreign: frozenset[tuple[str, int]] = frozenset(),
        metadata_dir: str | None = None,
        on_leadership: Callable[[list[Partition]], None] | None = None,
        on_isr_eligible: Callable[[], None] | None = None,
    ) -> None:
        """``log_dirs``: ``log.dirs`` (a list, or one directory). ``foreign``:
        partition directories another owner keeps (cluster mode:
        ``__cluster_metadata-0``, the Raft log), never opened as logs.
        ``metadata_dir``: where the metadata journal (``__cluster_metadata-0``)
        lives when it is a log here (``metadata.log.dir``; default the first
        log directory, as Kafka)."""
        dirs = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        self.node_id = node_id
        self.log_dir = dirs[0]
        self.fs = fs or OsFileSystem()
        self.clock = clock
        self.defaults = log_config_from_server(server_props)
        props = dict(server_props)
        props["log.dir"], props["log.dirs"] = dirs[0], ",".join(dirs)
        meta = (METADATA_TOPIC, 0)
        self.logs = LogManager(
            self.fs, clock, LogManagerConfig.from_properties(props), self.defaults, ids=ids,
            foreign=foreign,
            pinned={} if meta in foreign else {meta: metadata_dir or dirs[0]},
        )
        threads = server_props.get("num.replica.alter.log.dirs.threads") or ""
        rate = server_props.get("replica.alter.log.dirs.io.max.bytes.per.second") or ""
        self.mover = LogMover(self, int(threads) if threads.strip() else len(dirs),
                              float(rate) if rate.strip() else float("inf"))
        """Moves between log directories (AlterReplicaLogDirs)."""
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._indexes: dict[str, set[int]] = {}
        self._unopened: set[str] = set()
        """Topics with a partition whose log could not be opened at the last
        reconcile (reconciled again at the next one)."""
        """The partition indexes of each topic in :attr:`partitions` (an index,
        kept by :meth:`reconcile` alone, as the dict itself)."""
        self.isr_changes = IsrChangeCounts()
        """ISR shrinks and expands of the partitions this node led (every one's)."""
        self.default_min_isr = int(server_props.get("min.insync.replicas") or 1)
        self.on_leadership = on_leadership
        """Called after a reconcile with the partitions whose leader or epoch changed
        (the replica fetchers follow the new leaders)."""
        self.on_isr_eligible: Callable[[], None] = on_isr_eligible or (lambda: None)
        """Called when a follower's fetch makes it eligible to join an ISR (the
        ISR manager decides at once rather than at its next tick)."""
        self.on_released: Callable[[], None] = lambda: None
        """Called once partitions or logs were let go (a reconcile removed or moved
        some aside, a moved log replaced the old one): ``odradek serve`` hands
        the objects its start froze back to the garbage collector then
        (``gc.unfreeze``), so theirs are collected."""
        self._flushing: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._housekeeping: asyncio.Task[None] | None = None
        self.io_threads = int(server_props.get("odradek.log.writer.threads") or 0)
        """Writer threads for segment appends; 0: appends are written on the loop."""
        self._writer: LogWriter[Partition] | None = None

    def reconfigure(self, server_props: dict[str, str]) -> None:
        """New broker-level settings while running (dynamic broker configs): the
        topic defaults and ``min.insync.replicas``, which the next :meth:`reconcile`
        gives every log without its own override, and the cleaner's settings."""
        self.defaults = log_config_from_server(server_props)
        self.default_min_isr = int(server_props.get("min.insync.replicas") or 1)
        props = dict(server_props)
        props["log.dir"] = props["log.dirs"] = self.log_dir
        self.logs.reconfigure_cleaner(LogManagerConfig.from_properties(props).cleaner)

    @property
    def handles(self) -> HandleCache:
        return self.logs.handles

    def startup(self) -> None:
        """Open every log on disk: after a clean stop trust it, else recover its tail."""
        self.logs.startup()

    def metadata_partition(self) -> PartitionState:
        """``__cluster_metadata-0``, which the metadata journal appends to; not in
        :attr:`partitions` (clients never see it)."""
        plog = self.logs.get_or_create_log(METADATA_TOPIC, 0)
        return PartitionState(METADATA_TOPIC, 0, plog, local_id=self.node_id)

    def config_for(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties(overrides, self.defaults)

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs``, as configured."""
        return list(self.logs.log_dirs)

    def alter_log_dir(self, part: Partition, directory: str) -> None:
        """Move ``part`` to ``directory`` (AlterReplicaLogDirs: broker/replica/log_mover.py)."""
        self.mover.alter(part, directory)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def reconcile(self, image: MetadataImage, *, remove: bool = True,
                  at_offset: int = -1, may_lead: bool = True,
                  topics: Collection[str] | None = None,
                  only: Mapping[str, Collection[int]] | None = None) -> None:
        """:meth:`_reconcile`, with the leader-epoch checkpoints it changes (a
        partition led here at a new epoch notes it before any append) written
        together before it returns (:func:`~odradek.storage.epochs.deferred_writes`):
        a restarted broker given back the lead of thousands of partitions waited
        for their fsyncs one after another."""
        with deferred_writes() as pending:
            try:
                self._reconcile(image, remove=remove, at_offset=at_offset,
                                may_lead=may_lead, topics=topics, only=only)
            finally:
                self.logs.write_epochs(list(pending.values()))

    def _reconcile(self, image: MetadataImage, *, remove: bool, at_offset: int,
                   may_lead: bool, topics: Collection[str] | None,
                   only: Mapping[str, Collection[int]] | None) -> None:
        """Open logs for new partitions, apply config changes, drop removed topics.

        ``topics``: reconcile only these topics (those a metadata batch named,
        present or removed); the others are as the last reconcile left them.
        None (start-up, a snapshot, broker-wide changes): every partition and
        every log, so the work is the image's size; with ``topics`` it is the
        size of those topics only. ``only``: of a topic named there, just those
        partitions (the records changed nothing else of it: elections, ISR
        changes), so a batch of 10k elections spread over 300 topics of 100
        partitions reconciles 10k partitions, not 30k.

        With ``remove`` false (start-up), logs the image does not know are moved
        aside (``-stray``) and reported rather than deleted: a lost journal must
        not delete data. A log whose topic id (``partition.metadata``) is not the
        image's is another topic's data: it is moved aside too, before the
        image's topic gets a fresh directory, so two topics' data never mix.

        The caller passes an image that has caught up (a cluster node: with the
        quorum, :meth:`RaftNode.caught_up`), so a log the image does not name
        was really deleted or reassigned away; ``at_offset`` (the metadata
        offset the image was replayed to) goes into the warning that says so.

        With ``may_lead`` false (a cluster node whose own registration is not in
        the image yet: a restart within its session) a partition the image still
        says this broker leads is taken as having no leader here: this process
        leads nothing until the controller has registered it and named it
        leader at a new epoch. Becoming leader at the old epoch would write that
        epoch into its leader-epoch cache at whatever its log end now is (0
        after a wiped disk), and the cache would then answer divergence checks
        wrongly for good.
        """
        wanted: set[tuple[str, int]] = set()
        moved: list[Partition] = []
        if topics is not None and self._unopened:  # tried again at every change
            topics = {*topics, *self._unopened}
            only = {n: i for n, i in (only or {}).items() if n not in self._unopened}
        self._unopened = set()
        scope = (image.topics.values() if topics is None
                 else [image.topics[n] for n in topics if n in image.topics])
        restricted = only if topics is not None and only else {}
        members = [(t, _members(t, restricted.get(t.name))) for t in scope]
        self._prepare_new(members, may_lead)
        for topic, partitions in members:
            config = self.config_for(topic.configs)
            for p in partitions:
                if self.node_id not in p.replicas:
                    continue  # another broker's (cluster mode)
                key = (topic.name, p.partition)
                wanted.add(key)
                part = self.partitions.get(key)
                existing = self.logs.get_log(*key) if part is None else None
                if existing is not None and existing.topic_id not in (None, topic.topic_id):
                    where = self.logs.move_aside(*key)
                    log.warning(
                        "%s-%d on disk belongs to topic id %s, not to %s's %s (metadata "
                        "offset %d): moved aside to %s (nothing deleted; `odradek storage "
                        "restore-stray` puts it back)", *key, _tid(existing.topic_id),
                        topic.name, _tid(topic.topic_id), at_offset, where)
                if part is None:
                    try:
                        plog = self.logs.get_or_create_log(
                            topic.name, p.partition, config, topic_id=topic.topic_id
                        )
                    except (OSError, StorageError) as exc:
                        # (A full disk, say.) Not hosted here for now; the
                        # metadata change stands. Tried again at the next one.
                        log.warning("%s-%d: cannot open its log, tried again at the next "
                                    "metadata change: %s", *key, exc)
                        self._unopened.add(topic.name)
                        continue
                    if plog.config != config:
                        plog.update_config(config)
                    self.partitions[key] = self._adopt(topic.name, p.partition, plog,
                                                       p.leader_epoch)
                    self._indexes.setdefault(topic.name, set()).add(p.partition)
                elif part.log.config != config:
                    part.log.update_config(config)
                part = self.partitions[key]
                part.state.min_isr = int(topic.configs.get("min.insync.replicas")
                                         or self.default_min_isr)
                hw = part.state.high_watermark
                leader = p.leader if may_lead or p.leader != self.node_id else -1
                if part.state.apply_metadata(leader, p.leader_epoch, p.partition_epoch,
                                             p.replicas, p.isr, self.clock.now_ms()):
                    if not part.state.is_leader:
                        part.leadership_lost()
                    moved.append(part)
                # A new leader, or an ISR change, may have moved the HW.
                self.act(part, hw_change(part.state.high_watermark != hw))
        if topics is None:
            gone = [k for k in self.partitions if k not in wanted]
            candidates: Iterable[tuple[str, int]] = self.logs.logs()
        else:
            gone = [(n, i) for n in topics for i in self._indexes.get(n, ())
                    if (n, i) not in wanted
                    and (n not in restricted or i in restricted[n])]
            # Logs of these topics with no Partition (none after start-up's full
            # reconcile, which moved every other aside): those the image names.
            candidates = [(t.name, p.partition) for t, ps in members for p in ps]
        for key in gone:
            part = self.partitions.pop(key)
            indexes = self._indexes[key[0]]
            indexes.discard(key[1])
            if not indexes:
                del self._indexes[key[0]]
            part.state.become_follower(part.state.leader_epoch, -1)  # fetchers let go
            moved.append(part)
            part.abandon()
            self.mover.cancel(part)
            self.logs.delete_log(*key)  # (waits for its pending writes)
            if self._writer is not None:
                self._writer.forget(part)
        logs = self.logs.logs()
        strays = [tp for tp in candidates
                  if tp in logs and tp not in wanted and tp[0] != METADATA_TOPIC]
        for tp in strays:
            if remove:
                self.logs.delete_log(*tp)
            else:
                why = _stray_reason(image, tp, self.logs.get_log(*tp), self.node_id)
                where = self.logs.move_aside(*tp)
                log.warning("%s-%d %s (metadata offset %d): moved aside to %s (nothing "
                            "deleted; `odradek storage restore-stray` puts it back)", *tp,
                            why, at_offset, where)
        if gone or strays:
            self.on_released()
        if self.on_leadership is not None:
            self.on_leadership(moved)

    def _prepare_new(self, scope: Iterable[tuple[TopicImage, Iterable[PartitionImage]]],
                     may_lead: bool) -> None:
        """The directories of the partitions about to get their first log here,
        made durable together on threads (a CreateTopics of many partitions
        otherwise waits for their fsyncs one by one, on the loop): with the
        first leader epoch at offset 0 for those this broker leads at once,
        which the leader would write before its first append anyway."""
        node, known = self.node_id, self.partitions
        new = [((topic.name, p.partition), topic.topic_id,
                p.leader_epoch if may_lead and p.leader == node else None)
               for topic, partitions in scope for p in partitions
               if node in p.replicas and (topic.name, p.partition) not in known]
        if new:
            self.logs.prepare_new_logs(new)

    def _adopt(self, topic: str, index: int, plog: Log, leader_epoch: int) -> Partition:
        # Opened with no leader: the metadata applied next (reconcile) makes it lead
        # (one node: at once, the HW going to the log end) or follow.
        part = Partition(PartitionState(topic, index, plog, local_id=self.node_id,
                                        leader_epoch=leader_epoch, leader_id=-1,
                                        isr_changes=self.isr_changes))
        writer = self._log_writer()
        if writer is not None:
            plog.write_sink = writer.sink(part)
        future = self.logs.future_log(topic, index)
        if future is not None:
            if future.topic_id not in (None, plog.topic_id):
                self.logs.drop_future(topic, index)  # another topic's: never resumed
                future.close()
                future.handles.close_all()
            else:
                log.info("%s-%d: resuming its move to log directory %s", topic, index,
                         future.parent_dir)
                self.mover.start(part, part.state.attach_future(future))
        return part

    # -- log directories -----------------------------------------------------------------

    def flushing(self, part: Partition) -> asyncio.Future[None] | None:
        """The flush of ``part``'s log running on a worker thread, if any."""
        return self._flushing.get((part.topic, part.index))

    def promote_future(self, part: Partition) -> None:
        """Rename ``part``'s future log in and make it the partition's log (the
        mover calls this once :meth:`FutureReplica.finish` said it is whole, with
        no await in between)."""
        future = part.state.future
        assert future is not None and (part.topic, part.index) not in self._flushing
        assert not part.log.writes_pending, "the future log must have every write"
        new = self.logs.promote_future(part.topic, part.index)
        part.state.future_promoted(new)
        self.on_released()
        if self._writer is not None:
            new.write_sink = self._writer.sink(part)  # (it wrote inline while a copy)

    # -- writes, off the event loop --------------------------------------------------

    def _log_writer(self) -> LogWriter[Partition] | None:
        """The writer threads (started with the first partition); None when there
        are none (``odradek.log.writer.threads`` 0) or outside a running loop:
        logs then write inline."""
        if self._writer is None and self.io_threads > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return None
            self._writer = LogWriter(loop, self.io_threads, self._written)
        return self._writer

    def _written(self, done: list[tuple[Partition, list[AppendJob]]]) -> None:
        """On the loop: writes finished. Complete each partition's in order (the log
        end moves), then move the HW, wake fetches and the answers waiting."""
        for part, jobs in done:
            for job in jobs:
                job.complete(job.error)
            self.act(part, part.state.writes_completed())
            for job in jobs:
                fut = job.token
                if isinstance(fut, asyncio.Future) and not fut.done():
                    fut.set_result(None)

    async def written(self, result: Appended) -> None:
        """Return once the append's bytes are in the log; raise its StorageError
        (KAFKA_STORAGE_ERROR) if the write failed."""
        job = result.write
        if job is None:
            return
        if not job.done:
            fut = job.token
            if not isinstance(fut, asyncio.Future):
                fut = job.token = asyncio.get_running_loop().create_future()
            await asyncio.shield(fut)
        if job.failure is not None:
            raise job.failure

    async def writes_done(self, part: Partition) -> None:
        """Return once every write pending on ``part`` now has completed (failed
        or not): a follower fetches again, or a log is truncated, only then."""
        job = part.log.last_pending_write
        if job is not None:
            with contextlib.suppress(StorageError):
                await self.written(Appended(write=job))

    async def append(
        self, part: Partition, records: memoryview, origin: Origin, *, acks: int = -1
    ) -> Appended:
        """Append as the leader and wait for what ``acks`` asks (:meth:`append_now`
        then :meth:`complete`)."""
        result = self.append_now(part, records, origin, acks)
        await self.complete(part, result, acks)
        return result

    def append_now(self, part: Partition, records: memoryview, origin: Origin,
                   acks: int = 1, verify: Callable[[int, int], int] | None = None) -> Appended:
        """Append as the leader (:meth:`PartitionState.append_as_leader`) and wake the
        fetches waiting on ``part`` (consumers if the HW moved, followers in any
        case). Synchronous, so a coordinator can append and replay with nothing
        in between."""
        result = part.state.append_as_leader(records, origin, acks, verify)
        self.act(part, result.changed)
        return result

    async def complete(self, part: Partition, result: Appended, acks: int = -1) -> None:
        """What an append's answer waits for: its write, the fsync when
        ``flush.messages`` was reached, and with ``acks=-1`` the HW passing its
        last offset — a duplicate too (a retry of a batch that timed out may be in
        the log and not yet in every ISR member). Raises NotLeaderError if the
        leadership moves first, StorageError if the write fails."""
        if result.error_code or result.last_offset < 0:
            return
        await self.written(result)
        if result.flush_due:
            await self.flush(part)
        if acks == -1:
            await part.wait_for_high_watermark(result.last_offset, result.leader_epoch)

    def append_as_follower(self, part: Partition, records: memoryview, leader_hw: int,
                           leader_log_start: int) -> Appended:
        """Append what a follower fetched from its leader, and act on what changed."""
        result = part.state.append_as_follower(records, leader_hw, leader_log_start)
        self.act(part, result.changed)
        return result

    def act(self, part: Partition, changed: int) -> None:
        """The one place what a partition's state change calls for is done
        (:class:`~odradek.replication.effects.Changed`): a moved high watermark
        wakes the long polls and completes the waits it now covers (acks=all
        produces, coordinator writes); bytes published wake the long polls
        (followers waiting at the log end); a follower eligible for the ISR is
        proposed by the ISR manager. ``FLUSH`` is waited for by whoever answers
        for the append (the producer's answer, the follower's next fetch)."""
        if changed & Changed.HW:
            part.hw_moved()
        elif changed & Changed.READABLE:
            part.notify_followers()
        if changed & Changed.ISR_ELIGIBLE:
            self.on_isr_eligible()

    # -- fsync and housekeeping, off the event loop -----------------------------------

    async def _run_job(self, job: IoJob, key: tuple[str, int] | None) -> None:
        fut: asyncio.Future[None] | None = None
        if key is not None:
            fut = asyncio.get_running_loop().create_future()
            self._flushing[key] = fut
        try:
            error: BaseException | None = None
            try:
                await asyncio.to_thread(job.run)
            except OSError as exc:
                error = exc
            job.complete(error)
        finally:
            if key is not None and fut is not None:
                del self._flushing[key]
                fut.set_result(None)

    async def flush(self, part: Partition) -> None:
        """fsync everything appended to ``part`` so far, on a worker thread.

        Waits for a flush already running (started before this append) and
        then flushes what it did not cover; concurrent appends share fsyncs.
        """
        key = (part.topic, part.index)
        while (running := self._flushing.get(key)) is not None:
            await asyncio.shield(running)
        job = part.log.begin_flush()
        if job is not None:
            await self._run_job(job, key)

    async def _housekeep(self) -> None:
        while True:
            tick = self.logs.tick()
            for job in tick.jobs:
                key = job.partition if isinstance(job, FlushJob) else None
                await self._run_job(job, key)
            wait_ms = tick.next_deadline_ms - self.clock.monotonic_ms()
            await asyncio.sleep(min(max(wait_ms, 1), 1000) / 1000)

    def start_housekeeping(self) -> None:
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    async def close(self) -> None:
        """Stop housekeeping, wait for running fsyncs, then close cleanly
        (flush, checkpoints, clean-shutdown marker)."""
        if self._housekeeping is not None:
            await cancel_and_wait(self._housekeeping)
            self._housekeeping = None
        await self.mover.close()
        for part in self.partitions.values():
            await self.writes_done(part)
        for fut in list(self._flushing.values()):
            await asyncio.shield(fut)
        for part in self.partitions.values():
            part.stopping()
        await asyncio.to_thread(self.logs.close)
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await asyncio.to_thread(writer.stop)


def _tid(topic_id: uuid.UUID | None) -> str:
    """A topic id as Kafka's tools print it (base64url)."""
    return kafka_uuid_string(topic_id) if topic_id is not None else "unknown"


def _stray_reason(image: MetadataImage, tp: tuple[str, int], plog: Log | None,
                  node_id: int) -> str:
    """Why the caught-up image does not want a log on disk, in words."""
    raw_id = plog.topic_id if plog is not None else None
    topic_id = _tid(raw_id)
    topic = image.topics.get(tp[0])
    if topic is None:
        if raw_id is not None and any(t.topic_id == raw_id for t in image.topics.values()):
            return f"(topic id {topic_id}) is under another name in the metadata"
        return (f"(topic id {topic_id}) has no topic in the metadata: the topic was deleted"
                if raw_id is not None else "has no topic in the metadata")
    if tp[1] not in topic.partitions:
        return f"(topic id {topic_id}) is not a partition of {tp[0]} in the metadata"
    return (f"(topic id {topic_id}) has no replica on node {node_id} in the metadata: "
            "reassigned away")


def _members(topic: TopicImage, indexes: Collection[int] | None) -> Iterable[PartitionImage]:
    """The partitions of ``topic`` a reconcile looks at: all, or those of
    ``indexes`` the topic has."""
    if indexes is None:
        return topic.partitions.values()
    return [topic.partitions[i] for i in sorted(indexes) if i in topic.partitions]

"""The IO shell of the group coordinator: ``__consumer_offsets``, waiting requests, timers.

:class:`GroupRuntime` owns the pure :class:`~odradek.coordinator.coordinator.GroupCoordinator`.
A handler calls :meth:`GroupRuntime.call` with the operation; the runtime hands
the operation a token, appends the records the operation returns to their
``__consumer_offsets`` partitions (one batch per partition, key and value in
Kafka's format, see :mod:`odradek.coordinator.records`), replays them into the
coordinator, and then resolves the futures of the answered tokens — the
caller's own, or, for a JoinGroup that completes a rebalance, every member's.
A timer runs :meth:`GroupCoordinator.poll` at the coordinator's next deadline
(session expiry, rebalance and sync timeouts, the initial rebalance delay).

Durability: a commit is acknowledged once its record is appended to the log
(in the page cache), the same as a Produce with acks=all on one node; the
topic's flush settings decide fsync. ``__consumer_offsets`` is created on the
first FindCoordinator (or at start-up when a group request finds it missing)
with ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact`` and
``segment.bytes`` from ``offsets.topic.segment.bytes``.
At start-up each existing partition is replayed in a background task; until a
group's partition is loaded its requests get COORDINATOR_LOAD_IN_PROGRESS.

Only committed state is read (:mod:`odradek.broker.coordinators.coordinator_runtime`):
OffsetFetch answers, for a group whose offsets a write still in flight
changed, the offsets as they were before the oldest such write (kept until
the HW passes it: :meth:`GroupRuntime.committed_offsets`), so it never shows a
commit that may be truncated away and never waits for one. DescribeGroups,
ConsumerGroupDescribe and ListGroups wait until their partitions' writes are
committed (:meth:`GroupRuntime.settled`). A write that fails while this broker
still leads its partition drops the partition's groups and loads them again
from the log once the log is committed to its end (their requests get
COORDINATOR_LOAD_IN_PROGRESS meanwhile), which reverts what never committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from odradek.broker.aio import cancel_and_wait
from odradek.broker.config import BrokerConfig
from odradek.broker.coordinators.coordinator_runtime import (
    CoordinatorRuntime,
    Entry,
    Metadata,
    Pending,
    ensure_internal_topic,
)
from odradek.broker.ports import CoordinatorWriteError
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.clock import Clock
from odradek.coordinator import records as crecords
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.group import Token
from odradek.coordinator.offsets import CommitRequest, PartitionExists
from odradek.coordinator.records import OFFSETS_TOPIC, CoordinatorRecord, OffsetRecord
from odradek.storage.errors import StorageError
from odradek.wire.primitives import DecodeError

log = logging.getLogger("odradek.groups")

OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",  # replaced by offsets.topic.segment.bytes at creation
    "compression.type": "producer",
}
__all__ = ["CoordinatorWriteError", "GroupRuntime", "Metadata"]


@dataclass
class _InFlight:
    """A write to an offsets partition that may not be committed yet."""

    end: int
    """The partition's log end after it: committed once the HW reaches it."""
    before: dict[str, dict[Any, Any]]
    """{group: its offsets before the write}, for the groups it changed."""
    unstable: dict[str, set[tuple[str, int]]]
    """{group: partitions} a transaction's offsets were pending on before the
    write (its marker)."""


class GroupRuntime:
    def __init__(
        self, metadata: Metadata, partitions: PartitionManager, config: BrokerConfig,
        clock: Clock,
    ) -> None:
        self.metadata = metadata
        self.config = config
        self.clock = clock
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC, partitions)
        self.coordinator = GroupCoordinator(
            GroupConfig.from_properties(config.get_int, config.get),
            lambda: str(metadata.ids.uuid()))
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_token = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._expiry_task: asyncio.Task[None] | None = None
        self._started = False
        self.commit_timeout_s = config.get_int("offsets.commit.timeout.ms") / 1000
        """How long a write waits for its commit before its requests get a
        retriable error (``offsets.commit.timeout.ms``, Kafka's 5 s)."""
        self._uncommitted: dict[int, list[_InFlight]] = {}
        """Per partition: each write that changed committed offsets and may not
        be committed yet, oldest first."""

    # -- start-up and the offsets topic ---------------------------------------------------

    def start(self) -> None:
        """Begin replaying ``__consumer_offsets`` (in the background) if it exists,
        and expiring offsets every ``offsets.retention.check.interval.ms``."""
        loop = asyncio.get_running_loop()
        self._started = True
        self._expiry_task = loop.create_task(self._expire_forever())
        if OFFSETS_TOPIC not in self.metadata.image.topics:
            self.coordinator.loading.clear()
            return
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    async def ensure_topic(self) -> bool:
        """Create ``__consumer_offsets`` if it does not exist; True when it does."""
        if OFFSETS_TOPIC in self.metadata.image.topics:
            return True
        configs = dict(OFFSETS_TOPIC_CONFIGS)
        configs["segment.bytes"] = str(self.config.get_int("offsets.topic.segment.bytes"))
        if not await ensure_internal_topic(self.metadata, OFFSETS_TOPIC,
                                           self.coordinator.config.offsets_partitions,
                                           configs,
                                           self.config.get_int("offsets.topic.replication.factor")):
            return False
        if self._started and self._load_task is None:
            # New since start(): its partitions are empty, nothing to load. Before
            # start() (a cluster node still replaying the metadata log, where the
            # topic "appears" as the replay reaches it) the loading set must stay:
            # start() loads what this broker leads, and until then its groups wait.
            self._note_foreign()
            self.coordinator.loading.clear()
        return True

    def _note_foreign(self) -> None:
        """Cluster mode: the partitions other brokers lead are not ours to serve."""
        topic = self.metadata.image.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            self.coordinator.store.foreign = {
                p.partition for p in topic.partitions.values()
                if not self._leads(p.partition)}

    def _leads(self, index: int) -> bool:
        part = self.runtime.partitions.get(OFFSETS_TOPIC, index)
        return part is not None and part.state.is_leader

    def leadership_changed(self, moved: list[Partition]) -> None:
        """Cluster mode: ``__consumer_offsets`` partitions this broker started leading
        are loaded (their groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile);
        those it stopped leading are unloaded (NOT_COORDINATOR)."""
        if not self._started:
            return
        store = self.coordinator.store
        for part in moved:
            if part.topic != OFFSETS_TOPIC:
                continue
            self._uncommitted.pop(part.index, None)
            if part.state.is_leader:
                store.begin_load(part.index)
                task = asyncio.get_running_loop().create_task(self._load_one(part.index))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif part.index not in store.foreign:
                log.info("%s-%d: no longer led here; its groups are unloaded",
                         OFFSETS_TOPIC, part.index)
                store.unload(part.index)

    async def _load_one(self, index: int) -> None:
        await asyncio.sleep(0)
        if index not in self.coordinator.loading:
            return
        try:
            self._load(index)
        except (DecodeError, StorageError):
            log.exception("%s-%d: unreadable records; loaded what came before",
                          OFFSETS_TOPIC, index)
        self.coordinator.loaded(index, self.clock.now_ms())
        log.info("%s-%d: loaded (now led here)", OFFSETS_TOPIC, index)
        self._reschedule()

    async def _load_all(self) -> None:
        self._note_foreign()
        for p in sorted(self.coordinator.loading):
            if p in self.coordinator.store.foreign:
                self.coordinator.loaded(p, self.clock.now_ms())
                continue
            try:
                self._load(p)
            except (DecodeError, StorageError):
                log.exception("%s-%d: unreadable records; loaded what came before",
                              OFFSETS_TOPIC, p)
            self.coordinator.loaded(p, self.clock.now_ms())
            await asyncio.sleep(0)  # let requests in between partitions
        self._reschedule()

    def _load(self, index: int) -> None:
        now = self.clock.now_ms()
        for entry in self.runtime.read_partition(index):
            if not isinstance(entry, Entry):
                self.coordinator.replay_marker(entry.producer_id, entry.committed)
                continue
            try:
                record = crecords.decode(entry.key or b"", entry.value)
            except DecodeError:
                log.warning("%s-%d offset %d: not a coordinator record; skipped",
                            OFFSETS_TOPIC, index, entry.offset)
                continue
            if record is None:
                continue
            if entry.producer_id >= 0:
                self.coordinator.replay_txn(entry.producer_id, [record])
            else:
                self.coordinator.replay([record], now)

    async def _expire_forever(self) -> None:
        config = self.config
        interval_s = config.get_int("offsets.retention.check.interval.ms") / 1000
        retention_ms = config.get_int("offsets.retention.minutes") * 60_000
        while True:
            await asyncio.sleep(interval_s)
            await self.expire_offsets(retention_ms)

    async def expire_offsets(self, retention_ms: int) -> None:
        """One expiry pass (tombstones for expired offsets and emptied groups)."""
        if OFFSETS_TOPIC in self.metadata.image.topics:
            await self.apply(self.coordinator.expire_offsets(self.clock.now_ms(), retention_ms))

    async def topics_deleted(self, topics: set[str]) -> None:
        """Drop the committed offsets of deleted topics."""
        if OFFSETS_TOPIC in self.metadata.image.topics:
            await self.apply(self.coordinator.delete_topic_offsets(topics))

    # -- operations ---------------------------------------------------------------------

    async def call(self, op: Callable[[Token], Effects]) -> Any:
        """Run ``op`` with a new token and wait for the answer to that token."""
        token = self._next_token
        self._next_token += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        try:
            await self.apply(op(token))
            return await fut
        finally:
            self._waiting.pop(token, None)

    async def apply(self, fx: Effects) -> None:
        """Append ``fx.records`` and replay them, wait until they are committed (at
        or below the HW, fsynced where due), then deliver ``fx.replies``."""
        error: CoordinatorWriteError | None = None
        if fx.records:
            pending: list[Pending] = []
            try:
                pending = self._write(fx.records)
                await self.runtime.committed(pending, self.commit_timeout_s)
            except CoordinatorWriteError as exc:
                # A leadership that moved is routine in a cluster (the client finds
                # the new coordinator); anything else is an error.
                (log.info if "moved" in str(exc) else log.error)(
                    "group coordinator write failed: %s", exc)
                error = exc
                for p in pending:
                    if p.partition.state.is_leader and not self.runtime.is_settled(
                            p.partition.index):
                        self._reload_when_committed(p.partition.index)
        for token, response in fx.replies:
            fut = self._waiting.get(token)  # type: ignore[call-overload]
            if fut is not None and not fut.done():
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(response)
        self._reschedule()

    def _write(self, records: list[CoordinatorRecord]) -> list[Pending]:
        """Append records, one batch per partition, replaying each batch as it is
        appended (nothing runs in between). Raises CoordinatorWriteError after
        replaying what was appended before the failure."""
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for r in records:
            by_partition.setdefault(self.coordinator.partition_of(r.group), []).append(r)
        now = self.clock.now_ms()
        pending = []
        for p, recs in by_partition.items():
            done = self.runtime.append(p, [crecords.encode(r) for r in recs], now)
            pending.append(done)
            self._note_offsets(p, done.result.last_offset + 1, {
                r.group for r in recs if isinstance(r, OffsetRecord) or r.value is None})
            self.coordinator.replay(recs, now)
        return pending

    # -- what is committed ------------------------------------------------------------

    def _note_offsets(self, index: int, end: int, groups: set[str],
                      unstable: dict[str, set[tuple[str, int]]] | None = None) -> None:
        """Before a write that ends at ``end`` changes the offsets of ``groups``:
        keep their offsets as they are, for readers, until the write commits;
        ``unstable``: the partitions a transaction's offsets were pending on
        before the write (its marker), still pending for readers until then."""
        if not groups and not unstable:
            return
        self._prune(index)
        store = self.coordinator.store
        before = {g: dict(group.offsets) if (group := store.groups.get(g)) else {}
                  for g in groups}
        self._uncommitted.setdefault(index, []).append(_InFlight(end, before, unstable or {}))

    def _prune(self, index: int) -> None:
        writes = self._uncommitted.get(index)
        if not writes:
            return
        part = self.runtime.partitions.get(OFFSETS_TOPIC, index)
        hw = part.state.high_watermark if part is not None else 0
        while writes and writes[0].end <= hw:
            writes.pop(0)
        if not writes:
            del self._uncommitted[index]

    def committed_offsets(self, group_id: str) -> dict[Any, Any] | None:
        """The group's committed offsets when a write in flight changed them (the
        offsets before the oldest such write); None when its offsets are all
        committed (the coordinator's own are then the answer)."""
        index = self.coordinator.partition_of(group_id)
        self._prune(index)
        for write in self._uncommitted.get(index, ()):
            if group_id in write.before:
                return write.before[group_id]
        return None

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions whose offsets a transaction committed and whose marker
        is written but not committed: pending still, for a RequireStable fetch
        (as at the partition's high watermark; the store has applied the marker)."""
        index = self.coordinator.partition_of(group_id)
        self._prune(index)
        out: set[tuple[str, int]] = set()
        for write in self._uncommitted.get(index, ()):
            out |= write.unstable.get(group_id, set())
        return out

    async def settled(self, group_ids: Iterable[str] | None, timeout_s: float = 5.0,
                      ) -> set[str]:
        """Wait until every write to the partitions of ``group_ids`` (None: every
        partition led here) is committed; the groups whose partition did not
        settle in ``timeout_s`` (to be answered COORDINATOR_LOAD_IN_PROGRESS)."""
        coordinator = self.coordinator
        indexes: dict[int, list[str]] = {}
        if group_ids is None:
            indexes = {i: [] for i in self.runtime.written_end}
        else:
            for gid in group_ids:
                indexes.setdefault(coordinator.partition_of(gid), []).append(gid)
        unsettled: set[str] = set()
        for index, gids in indexes.items():
            if self.runtime.is_settled(index) or index in coordinator.store.foreign:
                continue
            if not await self.runtime.settled(index, timeout_s):
                unsettled.update(gids or {f"#{index}"})
        return unsettled

    def _reload_when_committed(self, index: int) -> None:
        """A write to ``index`` failed but this broker still leads it: drop its
        groups (they answer COORDINATOR_LOAD_IN_PROGRESS) and load them again
        from the log once the log is committed to its end, which leaves out
        whatever this broker wrote that never committed."""
        if index in self.coordinator.loading:
            return
        log.warning("%s-%d: a write failed; its groups are loaded again from the "
                    "committed log", OFFSETS_TOPIC, index)
        self._uncommitted.pop(index, None)
        self.coordinator.store.begin_load(index)
        task = asyncio.get_running_loop().create_task(self._reload(index))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reload(self, index: int) -> None:
        while index in self.coordinator.loading:
            if await self.runtime.log_committed(index, 5.0):
                await self._load_one(index)
                return
            if not self._leads(index):
                return  # leadership_changed unloads it

    # -- transactions -------------------------------------------------------------------

    async def txn_commit(
        self, req: CommitRequest, producer_id: int, producer_epoch: int,
        exists: PartitionExists,
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: validate, append the offsets as the producer's
        transactional batch, hold them pending until its marker, answer once
        committed. Raises CoordinatorWriteError if the append fails."""
        now = self.clock.now_ms()
        errors, records = self.coordinator.txn_commit_offsets(now, req, exists)
        if records:
            index = self.coordinator.partition_of(req.group_id)
            pending = self.runtime.append(
                index, [crecords.encode(r) for r in records], now,
                producer_id=producer_id, producer_epoch=producer_epoch, transactional=True)
            self.coordinator.replay_txn(producer_id, records)
            await self.runtime.committed([pending], self.commit_timeout_s)
        return errors

    def txn_marker(self, index: int, producer_id: int, commit: bool, end: int) -> None:
        """The transaction coordinator wrote ``producer_id``'s marker to
        ``__consumer_offsets-index`` (ending at ``end``): its pending offsets
        apply or go."""
        self.runtime.written_end[index] = max(self.runtime.written_end.get(index, 0), end)
        pending = self.coordinator.store.pending_txn.get(producer_id, {})
        unstable: dict[str, set[tuple[str, int]]] = {}
        for group, topic, partition in pending:
            unstable.setdefault(group, set()).add((topic, partition))
        self._note_offsets(index, end, set(unstable) if commit else set(), unstable)
        self.coordinator.replay_marker(producer_id, commit)

    # -- the timer ----------------------------------------------------------------------

    def _reschedule(self) -> None:
        due = self.coordinator.next_deadline_ms()
        if due is None or (self._timer_at_ms is not None and self._timer_at_ms <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max(0.0, (due - self.clock.now_ms()) / 1000) + 0.001
        self._timer_at_ms = due
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at_ms = None
        task = asyncio.get_running_loop().create_task(
            self.apply(self.coordinator.poll(self.clock.now_ms()))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def release_waiting(self) -> None:
        """The broker is stopping: every request waiting here (a JoinGroup parked
        for its rebalance, a write waiting for its commit) is answered now with
        the error of a failed write (retriable: the client finds the next
        coordinator)."""
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(CoordinatorWriteError("the coordinator is stopping"))

    async def close(self) -> None:
        await cancel_and_wait(self._expiry_task)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await cancel_and_wait(self._load_task)
        # Writes still waiting for their commit (one that cannot come once the
        # other replicas are gone, as when a whole cluster stops) are not waited
        # for: nothing was answered for them, and the log keeps what it has.
        await cancel_and_wait(*self._tasks)

"""The group coordinator's shell: requests waiting for their answer, offset expiry.

:class:`GroupRuntime` runs the pure
:class:`~odradek.coordinator.coordinator.GroupCoordinator` as a shard
(:class:`~odradek.broker.coordinators.group_shard.GroupShard`) of a
:class:`~odradek.broker.coordinators.coordinator_runtime.CoordinatorRuntime`
on ``__consumer_offsets``, which loads, unloads, writes and times it. What is
the group coordinator's own stays here:

* **requests**: a handler calls :meth:`GroupRuntime.call` with the operation;
  the operation gets a token, its records are written (one batch per
  ``__consumer_offsets`` partition, key and value in Kafka's format, see
  :mod:`odradek.coordinator.records`) and replayed, and once they are
  committed the futures of the answered tokens are resolved — the caller's
  own, or, for a JoinGroup that completes a rebalance, every member's;
* **timers**: :meth:`GroupCoordinator.poll` at the coordinator's next deadline
  (session expiry, rebalance and sync timeouts, the initial rebalance delay),
  and offset expiry every ``offsets.retention.check.interval.ms``;
* **committed reads**: OffsetFetch answers, for a group whose offsets a write
  still in flight changed, the offsets as they were before it
  (:class:`~odradek.broker.coordinators.group_shard.CommittedView`);
  DescribeGroups, ConsumerGroupDescribe and ListGroups wait until their
  partitions' writes are committed (:meth:`GroupRuntime.settled`).

Durability: a commit is answered once its record is at or below the high
watermark (on one node at once; the topic's flush settings decide fsync).
``__consumer_offsets`` is created on the first FindCoordinator (or at start-up
when a group request finds it missing) with ``offsets.topic.num.partitions``
partitions, ``cleanup.policy=compact`` and ``segment.bytes`` from
``offsets.topic.segment.bytes``. Until a group's partition is loaded its
requests get COORDINATOR_LOAD_IN_PROGRESS; a write that fails while this
broker still leads its partition reloads the partition from the committed log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from odradek.broker.config import BrokerConfig
from odradek.broker.coordinators.coordinator_runtime import (
    CoordinatorRuntime,
    Metadata,
    Written,
    routine,
)
from odradek.broker.coordinators.group_shard import CommittedView, GroupShard
from odradek.broker.coordinators.partition_writer import PartitionManagerWriter
from odradek.broker.ports import CoordinatorWriteError
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.clock import Clock
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.group import Token
from odradek.coordinator.offsets import CommitRequest, PartitionExists
from odradek.coordinator.records import OFFSETS_TOPIC, CoordinatorRecord, OffsetRecord
from odradek.metadata.image import MetadataImage

log = logging.getLogger("odradek.groups")

OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",  # replaced by offsets.topic.segment.bytes at creation
    "compression.type": "producer",
}
__all__ = ["CoordinatorWriteError", "GroupRuntime", "Metadata"]


class GroupRuntime:
    def __init__(
        self, metadata: Metadata, partitions: PartitionManager, config: BrokerConfig,
        clock: Clock,
    ) -> None:
        self.metadata = metadata
        self.config = config
        self.clock = clock
        self.coordinator = GroupCoordinator(
            GroupConfig.from_properties(config.get_int, config.get),
            lambda: str(metadata.ids.uuid()))
        writer = PartitionManagerWriter(OFFSETS_TOPIC, partitions)
        self.view = CommittedView(self.coordinator.store, writer.high_watermark)
        self.runtime: CoordinatorRuntime[CoordinatorRecord] = CoordinatorRuntime(
            OFFSETS_TOPIC, self.coordinator.config.offsets_partitions, writer,
            GroupShard(self.coordinator, clock, self.view, self._reschedule), metadata, clock)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_token = 0
        self._answering: dict[int, list[asyncio.Future[None]]] = {}
        """Per ``__consumer_offsets`` partition: the writes in flight there, each
        a future done once its answers are delivered (see :meth:`apply`)."""
        self.commit_timeout_s = config.get_int("offsets.commit.timeout.ms") / 1000
        """How long a write waits for its commit before its requests get a
        retriable error (``offsets.commit.timeout.ms``, Kafka's 5 s)."""

    # -- life cycle and the offsets topic -----------------------------------------------

    def start(self) -> None:
        """Load the ``__consumer_offsets`` partitions led here (in the background) if
        the topic exists, and expire offsets every
        ``offsets.retention.check.interval.ms``."""
        self.runtime.start()
        self._arm_expiry()

    async def ensure_topic(self) -> bool:
        """Create ``__consumer_offsets`` if it does not exist; True when it does."""
        configs = dict(OFFSETS_TOPIC_CONFIGS)
        configs["segment.bytes"] = str(self.config.get_int("offsets.topic.segment.bytes"))
        return await self.runtime.ensure_topic(
            configs, self.config.get_int("offsets.topic.replication.factor"))

    def leadership_changed(self, moved: list[Partition]) -> None:
        """Cluster mode: ``__consumer_offsets`` partitions this broker started leading
        are loaded (their groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile);
        those it stopped leading are unloaded (NOT_COORDINATOR)."""
        self.runtime.leadership_changed(p.index for p in moved if p.topic == OFFSETS_TOPIC)

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image, for the shard (the runtime fans it out)."""
        self.runtime.on_metadata(image)

    def _arm_expiry(self) -> None:
        interval_ms = self.config.get_int("offsets.retention.check.interval.ms")
        self.runtime.schedule("expire-offsets", self.clock.now_ms() + interval_ms,
                              self._expire)

    async def _expire(self) -> None:
        try:
            await self.expire_offsets(self.config.get_int("offsets.retention.minutes") * 60_000)
        finally:
            self._arm_expiry()

    async def expire_offsets(self, retention_ms: int) -> None:
        """One expiry pass (tombstones for expired offsets and emptied groups)."""
        if OFFSETS_TOPIC in self.metadata.image.topics:
            await self.apply(self.coordinator.expire_offsets(self.clock.now_ms(), retention_ms))

    async def topics_deleted(self, topics: set[str]) -> None:
        """Drop the committed offsets of deleted topics."""
        if OFFSETS_TOPIC in self.metadata.image.topics:
            await self.apply(self.coordinator.delete_topic_offsets(topics))

    # -- operations ---------------------------------------------------------------------

    async def call(self, op: Callable[[Token], Effects], group_id: str | None = None) -> Any:
        """Run ``op`` with a new token and wait for the answer to that token.

        ``group_id``: the group ``op`` reads, for an operation whose answer
        reads state that an earlier write may have changed (SyncGroup): when
        ``op`` writes nothing, its answer still waits until every write to the
        group's partition is committed (as Kafka's coordinator runtime defers
        a write operation that wrote no records behind the pending writes), so
        it never hands out what is not durable yet."""
        token = self._next_token
        self._next_token += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        try:
            await self.apply(op(token), group_id)
            return await fut
        finally:
            self._waiting.pop(token, None)

    async def apply(self, fx: Effects, group_id: str | None = None) -> None:
        """Write ``fx.records`` (one batch per partition, each replayed as it is
        appended), wait until they are committed, then deliver ``fx.replies``;
        with no records and a ``group_id``, wait first until the writes to that
        group's partition are committed (:meth:`call`)."""
        error: CoordinatorWriteError | None = None
        if not fx.records and group_id is not None and fx.replies:
            # Behind the writes in flight on the group's partition, and answered
            # after their answers: a follower's SyncGroup leaves after the
            # leader's, as Kafka completes them together in member order (a
            # client whose follower learnt its assignment first could act on
            # it before the leader had its own: aiokafka's KIP-345 tests).
            earlier = self._answering.get(self.coordinator.partition_of(group_id))
            if earlier:
                await asyncio.wait(list(earlier), timeout=self.commit_timeout_s)
            if await self.settled([group_id], self.commit_timeout_s):
                error = CoordinatorWriteError(
                    f"the writes before group {group_id}'s answer did not commit")
        answered: asyncio.Future[None] | None = None
        indexes: set[int] = set()
        if fx.records:
            answered = asyncio.get_running_loop().create_future()
            indexes = {self.coordinator.partition_of(r.group) for r in fx.records}
            for index in indexes:
                self._answering.setdefault(index, []).append(answered)
        try:
            if fx.records:
                try:
                    await self.runtime.committed(self._write(fx.records),
                                                 self.commit_timeout_s)
                except CoordinatorWriteError as exc:
                    # A leadership that moved is routine in a cluster (the client
                    # finds the new coordinator); anything else is an error.
                    (log.info if routine(exc) else log.error)(
                        "group coordinator write failed: %s", exc)
                    error = exc
            for token, response in fx.replies:
                fut = self._waiting.get(token)  # type: ignore[call-overload]
                if fut is not None and not fut.done():
                    if error is not None:
                        fut.set_exception(error)
                    else:
                        fut.set_result(response)
        finally:
            if answered is not None:
                for index in indexes:
                    waiting = self._answering[index]
                    waiting.remove(answered)
                    if not waiting:
                        del self._answering[index]
                answered.set_result(None)
        self._reschedule()

    def _write(self, records: list[CoordinatorRecord]) -> list[Written]:
        """Write records, one batch per partition; readers keep the offsets from
        before each batch until it commits."""
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for r in records:
            by_partition.setdefault(self.coordinator.partition_of(r.group), []).append(r)
        written = []
        for index, recs in by_partition.items():
            before = self.view.snapshot(
                {r.group for r in recs if isinstance(r, OffsetRecord) or r.value is None})
            done = self.runtime.write(index, recs)
            self.view.note(index, done.end, before)
            written.append(done)
        return written

    # -- what is committed ------------------------------------------------------------

    def committed_offsets(self, group_id: str) -> dict[Any, Any] | None:
        """The group's committed offsets when a write in flight changed them (the
        offsets before the oldest such write); None when its offsets are all
        committed (the coordinator's own are then the answer)."""
        return self.view.committed_offsets(self.coordinator.partition_of(group_id), group_id)

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions whose offsets a transaction committed and whose marker
        is written but not committed: pending still, for a RequireStable fetch
        (as at the partition's high watermark; the store has applied the marker)."""
        return self.view.unstable_offsets(self.coordinator.partition_of(group_id), group_id)

    async def settled(self, group_ids: Iterable[str] | None, timeout_s: float = 5.0,
                      ) -> set[str]:
        """Wait until every write to the partitions of ``group_ids`` (None: every
        partition written to) is committed; the groups whose partition did not
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

    # -- transactions -------------------------------------------------------------------

    async def txn_commit(
        self, req: CommitRequest, producer_id: int, producer_epoch: int,
        exists: PartitionExists,
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: validate, write the offsets as the producer's
        transactional batch (pending until its marker), answer once committed.
        Raises CoordinatorWriteError if the write fails."""
        errors, records = self.coordinator.txn_commit_offsets(self.clock.now_ms(), req, exists)
        if records:
            written = self.runtime.write(
                self.coordinator.partition_of(req.group_id), records,
                producer_id=producer_id, producer_epoch=producer_epoch, transactional=True)
            await self.runtime.committed([written], self.commit_timeout_s)
        return errors

    def txn_marker(self, index: int, producer_id: int, commit: bool, end: int) -> None:
        """The transaction coordinator wrote ``producer_id``'s marker to
        ``__consumer_offsets-index`` (ending at ``end``): its pending offsets
        apply or go."""
        self.runtime.note_marker(index, producer_id, commit, end)

    # -- the timer ----------------------------------------------------------------------

    def _reschedule(self) -> None:
        due = self.coordinator.next_deadline_ms()
        if due is not None:
            self.runtime.schedule("poll", due, self._poll)

    async def _poll(self) -> None:
        await self.apply(self.coordinator.poll(self.clock.now_ms()))

    def release_waiting(self) -> None:
        """The broker is stopping: every request waiting here (a JoinGroup parked
        for its rebalance, a write waiting for its commit) is answered now with
        the error of a failed write (retriable: the client finds the next
        coordinator)."""
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(CoordinatorWriteError("the coordinator is stopping"))

    async def close(self) -> None:
        await self.runtime.close()

"""The transaction coordinator's shell: decisions, markers, the cleanup timer.

:class:`TxnRuntime` runs the pure
:class:`~odradek.coordinator.txn.coordinator.TransactionCoordinator` as a shard
(:class:`~odradek.broker.coordinators.txn_shard.TxnShard`) of a
:class:`~odradek.broker.coordinators.coordinator_runtime.CoordinatorRuntime` on
``__transaction_state``, which loads (at start-up, and where this broker
becomes leader), unloads, writes and times it. What is the transaction
coordinator's own stays here:

* **decide**: :meth:`TxnRuntime.run` writes a decision's record (appended and
  replayed with nothing in between), then waits until the record is committed
  (at or below the HW, fsynced where due) before the request is answered;
* **markers**: a decided transaction's :class:`MarkerJob` runs as a task: one
  control batch (COMMIT or ABORT, Kafka's format) per partition, appended
  through the partition layer with the coordinator origin and waited on like
  ``acks=all``, or sent by WriteTxnMarkers to the partition's leader when that
  is another broker; markers that reach ``__consumer_offsets`` are handed to
  the group coordinator (transactional offsets become visible, or are
  dropped); then CompleteCommit/CompleteAbort is written. A marker that cannot
  be written is retried; a partition whose topic is gone is skipped, as Kafka
  does. Transactions a load finds PrepareCommit/PrepareAbort get their
  markers again;
* **timer**: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
  transactions past their timeout are fenced and aborted; every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` idle ids
  older than ``transactional.id.expiration.ms`` are tombstoned.

What is on disk when EndTxn answers: the PrepareX record, at or below the HW
(docs/transactions.md). The markers follow; until CompleteX is written the id
answers CONCURRENT_TRANSACTIONS, and a restart resumes them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.config import BrokerConfig
from odradek.broker.coordinators.coordinator_runtime import CoordinatorRuntime, Metadata, routine
from odradek.broker.coordinators.partition_writer import PartitionManagerWriter
from odradek.broker.coordinators.txn_shard import TxnShard
from odradek.broker.peers import BrokerUnavailable, NoPeers, Peers
from odradek.broker.ports import CoordinatorWriteError, PartitionGoneError
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common import crashpoints
from odradek.common.clock import Clock
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.txn.coordinator import (
    Decision,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
)
from odradek.coordinator.txn.records import TXN_TOPIC, TxnRecord
from odradek.metadata.image import MetadataImage
from odradek.replication.partition import Appended, Origin
from odradek.storage.errors import StorageError
from odradek.wire.errors import ErrorCode
from odradek.wire.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, control_record

if TYPE_CHECKING:
    from odradek.broker.coordinators.group_runtime import GroupRuntime

log = logging.getLogger("odradek.transactions")

TXN_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "uncompressed",
    "min.insync.replicas": "1",
}
MARKER_RETRY_S = 0.1
SETTLE_S = 5.0
"""How long an answer waits for the writes in flight before it to commit."""


def append_marker(
    partitions: PartitionManager, groups: GroupRuntime | None, part: Partition,
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int,
) -> Appended:
    """Append one COMMIT/ABORT marker to ``part`` through the partition layer (the
    coordinator origin); a marker that reaches ``__consumer_offsets`` is handed to
    the group coordinator, so the producer's pending offsets apply or go. The
    caller waits for the answer with ``partitions.complete(part, result, -1)``."""
    kind = CONTROL_COMMIT if commit else CONTROL_ABORT
    batch = build_batch(
        [control_record(kind, offset=0, timestamp=now_ms, coordinator_epoch=coordinator_epoch)],
        producer_id=producer_id, producer_epoch=producer_epoch, transactional=True,
        control=True)
    result = partitions.append_now(part, memoryview(batch), Origin.COORDINATOR)
    if result.error_code == 0 and part.topic == OFFSETS_TOPIC and groups is not None:
        groups.txn_marker(part.index, producer_id, commit, result.last_offset + 1)
    return result


class TxnRuntime:
    def __init__(
        self, metadata: Metadata, partitions: PartitionManager, config: BrokerConfig,
        clock: Clock, groups: Callable[[], GroupRuntime | None], peers: Peers | None = None,
    ) -> None:
        """``peers``: requests to other brokers (a cluster's broker channel;
        default: a single node's, which has none)."""
        self.metadata = metadata
        self.partitions = partitions
        self.config = config
        self.clock = clock
        self.groups = groups
        self.num_partitions = config.get_int("transaction.state.log.num.partitions")
        self.coordinator = TransactionCoordinator(TxnConfig(
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            partitions=self.num_partitions,
        ))
        self.runtime: CoordinatorRuntime[TxnRecord] = CoordinatorRuntime(
            TXN_TOPIC, self.num_partitions, PartitionManagerWriter(TXN_TOPIC, partitions),
            TxnShard(self.coordinator, self._spawn), metadata, clock)
        self.channel: Peers = peers if peers is not None else NoPeers()
        """Where markers for partitions led elsewhere are sent."""
        self.write_timeout_s = config.get_int("request.timeout.ms") / 1000
        """How long a write to ``__transaction_state`` waits for its commit before
        the request gets a retriable error (Kafka's coordinator uses the broker's
        ``request.timeout.ms``)."""
        self._next_expiry_ms = 0

    # -- life cycle ---------------------------------------------------------------------

    @property
    def loaded(self) -> asyncio.Event:
        """Set once the partitions led at start are loaded."""
        return self.runtime.loaded

    @property
    def started(self) -> bool:
        return self.runtime.started

    def start(self) -> None:
        """Load the ``__transaction_state`` partitions led here (in the background)
        if the topic exists (their unfinished markers resume), and start the timer."""
        self.runtime.start()
        self._next_expiry_ms = self.clock.now_ms() + self.config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms")
        self._arm_cleanup()

    def write_marker(self, part: Partition, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now_ms: int) -> Appended:
        """Append one COMMIT/ABORT marker to ``part``, a partition this broker
        leads (WriteTxnMarkers): :func:`append_marker`."""
        return append_marker(self.partitions, self.groups(), part, producer_id, producer_epoch,
                             commit, coordinator_epoch, now_ms)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NOT_COORDINATOR for a transactional id whose ``__transaction_state``
        partition another broker leads (cluster mode; the client looks it up
        again), COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        if not self.started or TXN_TOPIC not in self.metadata.image.topics:
            return ErrorCode.NONE
        index = self.partition_of(transactional_id)
        if not self.runtime.leads(index):
            return ErrorCode.NOT_COORDINATOR
        if self.runtime.is_loading(index):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def leadership_changed(self, moved: list[Partition]) -> None:
        """Cluster mode: a ``__transaction_state`` partition this broker now leads is
        loaded and the markers of its decided transactions resumed; one it no
        longer leads is unloaded (its transactions are the new leader's)."""
        self.runtime.leadership_changed(p.index for p in moved if p.topic == TXN_TOPIC)

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image, for the shard (the runtime fans it out)."""
        self.runtime.on_metadata(image)

    async def close(self) -> None:
        await self.runtime.close()

    async def ensure_topic(self) -> bool:
        """Create ``__transaction_state`` if it does not exist; True when it does."""
        configs = dict(TXN_TOPIC_CONFIGS)
        configs["segment.bytes"] = str(self.config.get_int(
            "transaction.state.log.segment.bytes"))
        configs["min.insync.replicas"] = str(self.config.get_int("transaction.state.log.min.isr"))
        return await self.runtime.ensure_topic(
            configs, self.config.get_int("transaction.state.log.replication.factor"))

    def partition_of(self, transactional_id: str) -> int:
        return self.coordinator.partition_of(transactional_id)

    # -- decisions ----------------------------------------------------------------------

    async def run(self, transactional_id: str, decision: Decision) -> ErrorCode:
        """Write and replay ``decision``'s record, wait until it is committed, start
        its markers; the error code to answer with. A decision with no record
        was made on state that writes in flight may have changed: it is answered
        only once they are committed (no answer rests on a record that may be
        truncated away). A write that fails while this broker still leads the
        partition reverts the partition's state (the runtime reloads it); the
        client gets a retriable error either way."""
        index = self.partition_of(transactional_id)
        if decision.record is None:
            if not self.runtime.is_settled(index) and not await self.runtime.settled(
                    index, SETTLE_S):
                return self._unavailable(index)
        else:
            try:
                written = self.runtime.write(index, [decision.record])
                await self.runtime.committed([written], self.write_timeout_s)
            except CoordinatorWriteError as exc:
                (log.info if routine(exc) else log.error)(
                    "transaction coordinator write failed: %s", exc)
                return self._unavailable(index)
        if decision.markers is not None:
            crashpoints.reach("txn.after_prepare")
            self._spawn(decision.markers)
        return decision.error

    def _unavailable(self, index: int) -> ErrorCode:
        """NOT_COORDINATOR once another broker leads ``index``, else
        COORDINATOR_NOT_AVAILABLE: both send the client to look again and retry."""
        return (ErrorCode.COORDINATOR_NOT_AVAILABLE if self.runtime.leads(index)
                else ErrorCode.NOT_COORDINATOR)

    async def settled(self, timeout_s: float = SETTLE_S) -> bool:
        """Wait until every write to the partitions led here is committed (what
        ListTransactions and DescribeTransactions then read is committed)."""
        return await self.runtime.settled_all(timeout_s)

    def _spawn(self, job: MarkerJob) -> None:
        # The coordinator epoch in markers is the leader epoch of the transaction's
        # __transaction_state partition: a partition leader refuses markers from a
        # coordinator older than the last one it saw (TRANSACTION_COORDINATOR_FENCED).
        epoch = self.runtime.writer.leader_epoch(self.partition_of(job.transactional_id))
        if epoch > job.coordinator_epoch:
            job = dataclasses.replace(job, coordinator_epoch=epoch)
        self.runtime.spawn(self._send_markers(job))

    def _still_coordinator(self, job: MarkerJob) -> bool:
        """False once this broker stopped leading the transaction's partition (its
        new coordinator resumes the markers) or is closing."""
        return not self.runtime.closing and self.runtime.leads(
            self.partition_of(job.transactional_id))

    async def _send_markers(self, job: MarkerJob) -> None:
        for n, (topic, index) in enumerate(sorted(job.partitions)):
            if n == 1:
                crashpoints.reach("txn.after_first_marker")
            while self._still_coordinator(job):
                try:
                    if await self._write_marker(job, topic, index):
                        break
                except (CoordinatorWriteError, OSError, StorageError) as exc:
                    log.warning("marker for %s-%d (transaction %r): %s; retrying",
                                topic, index, job.transactional_id, exc)
                await asyncio.sleep(MARKER_RETRY_S)
        if not self._still_coordinator(job):
            return
        crashpoints.reach("txn.before_complete")
        decision = self.coordinator.complete(job, self.clock.now_ms())
        while await self.run(job.transactional_id, decision) != ErrorCode.NONE:
            if not self._still_coordinator(job):
                return
            await asyncio.sleep(MARKER_RETRY_S)
            decision = self.coordinator.complete(job, self.clock.now_ms())

    async def _write_marker(self, job: MarkerJob, topic: str, index: int) -> bool:
        """Append one marker and wait for it; True when done (or the partition is gone).
        A partition another broker leads (cluster mode) gets it by WriteTxnMarkers."""
        part = self.partitions.get(topic, index)
        if part is None or not part.state.is_leader:
            t = self.metadata.image.topics.get(topic)
            p = t.partitions.get(index) if t is not None else None
            if p is None:
                return True  # the topic was deleted: nothing to mark
            if p.leader != self.metadata.node_id:
                return await self._send_marker(job, topic, index, p.leader)
            if part is None:
                raise CoordinatorWriteError(f"{topic}-{index} is not open here yet")
        result = append_marker(self.partitions, self.groups(), part, job.producer_id,
                               job.producer_epoch, job.commit, job.coordinator_epoch,
                               self.clock.now_ms())
        if result.error_code == ErrorCode.INVALID_PRODUCER_EPOCH:
            log.warning("%s-%d has a newer epoch than the marker of %r; skipped",
                        topic, index, job.transactional_id)
            return True
        if result.error_code:
            raise CoordinatorWriteError(f"{result.error_code}: {result.error_message}")
        try:
            await self.partitions.complete(part, result, acks=-1)
        except PartitionGoneError:
            return True
        except StorageError as exc:  # the marker's write failed: tried again
            raise CoordinatorWriteError(str(exc)) from exc
        return True

    def verify_produce(self, transactional_id: str | None, producer_id: int,
                       producer_epoch: int, partition: tuple[str, int]) -> int:
        """KIP-890 (part 1) for a transactional batch: an error code unless
        ``partition`` is in the producer's ongoing transaction at ``producer_epoch``
        (INVALID_TXN_STATE or INVALID_PRODUCER_EPOCH). A producer whose transaction
        coordinator is another broker is not verified here (as before KIP-890: the
        batch is taken; docs/transactions.md)."""
        if transactional_id is not None and self.coordinator_error(transactional_id):
            return 0
        return self.coordinator.verify(producer_id, producer_epoch, partition)

    async def add_implicitly(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: list[tuple[str, int]],
                             timeout_s: float) -> dict[tuple[str, int], ErrorCode]:
        """Transactions v2: add ``partitions`` to the producer's transaction on
        its behalf (:mod:`odradek.broker.coordinators.txn_implicit`)."""
        from odradek.broker.coordinators.txn_implicit import add_implicitly

        return await add_implicitly(self, transactional_id, producer_id, producer_epoch,
                                    partitions, timeout_s)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partition: tuple[str, int]) -> ErrorCode:
        """Is ``partition`` in the producer's ongoing transaction, asked of the
        transaction's own coordinator wherever it is (KIP-890's verification:
        AddPartitionsToTxn v4 ``verify_only`` to the leader of the id's
        ``__transaction_state`` partition when that is another broker). The
        answer in TxnOffsetCommit's terms: NONE, INVALID_TXN_STATE (not in the
        transaction, or no such transaction), INVALID_PRODUCER_EPOCH, or
        COORDINATOR_NOT_AVAILABLE when the coordinator cannot be asked now (the
        client retries)."""
        from odradek.wire.messages import add_partitions_to_txn_request as ap

        if not transactional_id or not self.coordinator_error(transactional_id):
            return self.coordinator.verify(producer_id, producer_epoch, partition)
        image = self.metadata.image
        topic = image.topics.get(TXN_TOPIC)
        p = topic.partitions.get(self.partition_of(transactional_id)) if topic else None
        leader = p.leader if p is not None else -1
        if leader < 0 or leader == self.metadata.node_id:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        request = ap.AddPartitionsToTxnRequest(transactions=[ap.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True,
            topics=[ap.AddPartitionsToTxnTopic(partition[0], [partition[1]])])])
        try:
            response = await self.channel.request(leader, request, 4)
            code = response.error_code or (
                response.results_by_transaction[0].topic_results[0]
                .results_by_partition[0].partition_error_code)
        except (BrokerUnavailable, IndexError, AttributeError) as exc:
            log.info("verifying %r with its coordinator %d failed: %s", transactional_id,
                     leader, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return _VERIFIED_AS.get(ErrorCode(code), ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _send_marker(self, job: MarkerJob, topic: str, index: int, leader: int) -> bool:
        from odradek.wire.messages import write_txn_markers_request as wm

        if leader < 0:
            raise CoordinatorWriteError(f"{topic}-{index} has no leader to mark")
        request = wm.WriteTxnMarkersRequest(markers=[wm.WritableTxnMarker(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch,
            transaction_result=job.commit,
            topics=[wm.WritableTxnMarkerTopic(topic, [index])],
            coordinator_epoch=job.coordinator_epoch)])
        try:
            response = await self.channel.request(leader, request, 1)
        except BrokerUnavailable as exc:
            raise CoordinatorWriteError(str(exc)) from exc
        code = response.markers[0].topics[0].partitions[0].error_code
        if code == ErrorCode.INVALID_PRODUCER_EPOCH:
            log.warning("%s-%d has a newer epoch than the marker of %r; skipped",
                        topic, index, job.transactional_id)
            return True
        if code:
            raise CoordinatorWriteError(f"{topic}-{index} at broker {leader}: error {code}")
        return True

    # -- the timer ----------------------------------------------------------------------

    def _arm_cleanup(self) -> None:
        every_ms = self.config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.runtime.schedule("txn-cleanup", self.clock.now_ms() + every_ms, self._cleanup)

    async def _cleanup(self) -> None:
        """Abort the transactions past their timeout; every
        ``transaction.remove.expired.transaction.cleanup.interval.ms``, tombstone
        the ids idle too long. (Partitions still loading wait for the next pass.)"""
        try:
            now = self.clock.now_ms()
            for decision in self.coordinator.abort_expired(now):
                assert decision.record is not None
                tid = decision.record.transactional_id
                if self.runtime.is_loading(self.partition_of(tid)):
                    continue
                log.info("aborting transaction %r: timed out", tid)
                await self.run(tid, decision)
            if self.clock.now_ms() >= self._next_expiry_ms:
                self._next_expiry_ms = self.clock.now_ms() + self.config.get_int(
                    "transaction.remove.expired.transaction.cleanup.interval.ms")
                for decision in self.coordinator.expire_ids(now):
                    assert decision.record is not None
                    tid = decision.record.transactional_id
                    if not self.runtime.is_loading(self.partition_of(tid)):
                        await self.run(tid, decision)
        finally:
            self._arm_cleanup()


_VERIFIED_AS = {
    ErrorCode.NONE: ErrorCode.NONE,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.CONCURRENT_TRANSACTIONS,
}
"""A coordinator's verify-only answer as TxnOffsetCommit reports it (the local
check's codes); anything else (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
...) is COORDINATOR_NOT_AVAILABLE: the client finds its coordinators again and
retries."""

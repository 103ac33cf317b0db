"""The transaction coordinator's state machine (Kafka's ``TransactionCoordinator``).

Pure: each operation takes the request and ``now_ms`` and returns a
:class:`Decision` — an error code, at most one record for
``__transaction_state`` that the IO shell appends and replays before it
answers, and, when a transaction was decided, the :class:`MarkerJob` the shell
runs afterwards. The state is only ever the replay of records
(:meth:`TransactionCoordinator.replay`), so a restart rebuilds exactly what was
acknowledged.

States (the status byte Kafka stores): Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6 (a tombstone),
PrepareEpochFence 7 (never stored: a fenced Ongoing transaction is written as
PrepareAbort with the epoch bumped). Transitions::

    Empty|CompleteX --InitProducerId--> Empty (epoch + 1)
    Empty|Ongoing|CompleteX --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn--> PrepareCommit|PrepareAbort --markers written--> CompleteX
    Ongoing --timeout, or InitProducerId of a new instance--> PrepareAbort (epoch + 1)
    Empty|CompleteX --transactional.id.expiration.ms idle--> Dead (tombstone)

While a transaction is PrepareX its id answers CONCURRENT_TRANSACTIONS (the
client retries). Invariant: a transaction's partitions get its markers only
after PrepareX is in the log, and CompleteX is written only after every
marker is; on load, PrepareX transactions get their markers again, so a crash
at any point ends each transaction wholly committed or wholly aborted.

Fencing errors are decided as PRODUCER_FENCED; the handlers turn them into
INVALID_PRODUCER_EPOCH for the request versions that predate it, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.coordinator.txn.records import TxnRecord, partition_for, partitions_schema
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.transaction_log_value import TransactionLogValue

E = ErrorCode
MAX_EPOCH = 32767
"""Epochs at or above ``MAX_EPOCH - 1`` are exhausted: a new producer id is due."""


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return "".join(w.capitalize() for w in self.name.split("_"))


STATE_BY_NAME = {s.kafka_name: s for s in TxnState}


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = -1
    """The epoch before the last bump (memory only; KIP-360 retries)."""

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            transaction_partitions=(None if self.state is TxnState.EMPTY
                                    else partitions_schema(self.partitions)),
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
        )

    def record(self) -> TxnRecord:
        return TxnRecord(self.transactional_id, self.to_value())


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """Kafka's broker settings for transactions."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    partitions: int = 50


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write ``commit`` markers of ``producer_id``/``producer_epoch`` to every
    partition, then :meth:`TransactionCoordinator.complete` the transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
    coordinator_epoch: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    error: ErrorCode = E.NONE
    record: TxnRecord | None = None
    markers: MarkerJob | None = None
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.transactions: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}
        """Producer id -> its transactional id."""

    # -- replay -------------------------------------------------------------------------

    def replay(self, record: TxnRecord) -> None:
        """Apply a record that is in the log (after each append, and at load)."""
        tid, value = record.transactional_id, record.value
        old = self.transactions.get(tid)
        if old is not None and self.by_producer.get(old.producer_id) == tid:
            del self.by_producer[old.producer_id]
        if value is None:
            self.transactions.pop(tid, None)
            return
        self.by_producer[value.producer_id] = tid
        partitions = {(p.topic, i) for p in value.transaction_partitions or () for i in
                      p.partition_ids}
        last_epoch = -1
        if old is not None and old.producer_id == value.producer_id:
            last_epoch = (old.producer_epoch if old.producer_epoch != value.producer_epoch
                          else old.last_producer_epoch)
        self.transactions[tid] = TxnMetadata(
            tid, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
            TxnState(value.transaction_status), partitions,
            value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms,
            last_epoch,
        )

    def pending_markers(self, partition: int | None = None) -> list[MarkerJob]:
        """Marker jobs of every decided, not yet completed transaction (after a load)
        of ``__transaction_state`` partition ``partition`` (None: of every one)."""
        return [self._job(m) for m in self.transactions.values()
                if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                and (partition is None or self.partition_of(m.transactional_id) == partition)]

    def partition_of(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return partition_for(transactional_id, self.config.partitions)

    def unload(self, partition: int) -> None:
        """Forget the transactions of ``partition`` (another broker coordinates
        them now, or they are about to be replayed again)."""
        for tid in [t for t in self.transactions if self.partition_of(t) == partition]:
            meta = self.transactions.pop(tid)
            if self.by_producer.get(meta.producer_id) == tid:
                del self.by_producer[meta.producer_id]

    # -- InitProducerId -----------------------------------------------------------------

    def init_producer_id(
        self, tid: str, timeout_ms: int, now_ms: int, new_producer_id: Callable[[], int],
        producer_id: int = -1, producer_epoch: int = -1,
    ) -> Decision:
        if not tid:
            return Decision(E.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return Decision(E.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(tid)
        if meta is None:
            meta = TxnMetadata(tid, new_producer_id(), 0, timeout_ms, TxnState.EMPTY,
                               last_update_ms=now_ms)
            return self._answer_with(meta)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Decision(E.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0:  # KIP-360: a known producer asks to bump its epoch
            if producer_id != meta.producer_id:
                return Decision(E.PRODUCER_FENCED)
            if producer_epoch not in (meta.producer_epoch, meta.last_producer_epoch):
                return Decision(E.PRODUCER_FENCED)
            if (producer_epoch == meta.last_producer_epoch
                    and meta.state is not TxnState.ONGOING):  # a retried bump
                return Decision(producer_id=meta.producer_id,
                                producer_epoch=meta.producer_epoch)
        if meta.state is TxnState.ONGOING:
            # A new instance fences the old one: abort its transaction at a
            # bumped epoch; the client retries once the abort is complete.
            decision = self._fence_and_abort(meta, now_ms)
            return Decision(E.CONCURRENT_TRANSACTIONS, decision.record, decision.markers)
        nxt = TxnMetadata(tid, meta.producer_id, meta.producer_epoch + 1, timeout_ms,
                          TxnState.EMPTY, last_update_ms=now_ms,
                          last_producer_epoch=meta.producer_epoch)
        if nxt.producer_epoch >= MAX_EPOCH - 1:
            nxt.producer_id, nxt.producer_epoch, nxt.last_producer_epoch = (
                new_producer_id(), 0, -1)
        return self._answer_with(nxt)

    @staticmethod
    def _answer_with(meta: TxnMetadata) -> Decision:
        return Decision(record=meta.record(), producer_id=meta.producer_id,
                        producer_epoch=meta.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------

    def add_partitions(
        self, tid: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]], now_ms: int,
    ) -> Decision:
        meta = self.transactions.get(tid)
        problem = self._producer_error(meta, producer_id, producer_epoch)
        if problem:
            return Decision(problem)
        assert meta is not None
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return Decision(E.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.DEAD:
            return Decision(E.INVALID_TXN_STATE)
        wanted = set(partitions)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return Decision()
        ongoing = meta.state is TxnState.ONGOING
        nxt = TxnMetadata(
            tid, meta.producer_id, meta.producer_epoch, meta.timeout_ms, TxnState.ONGOING,
            (meta.partitions if ongoing else set()) | wanted,
            meta.start_ms if ongoing else now_ms, now_ms, meta.last_producer_epoch)
        return Decision(record=nxt.record())

    # -- EndTxn -------------------------------------------------------------------------

    def end_transaction(
        self, tid: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> Decision:
        meta = self.transactions.get(tid)
        problem = self._producer_error(meta, producer_id, producer_epoch)
        if problem:
            return Decision(problem)
        assert meta is not None
        state = meta.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            nxt = TxnMetadata(tid, meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                              target, set(meta.partitions), meta.start_ms, now_ms,
                              meta.last_producer_epoch)
            return Decision(record=nxt.record(), markers=self._job(nxt))
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if state is done:
            return Decision()  # a retry of a finished EndTxn
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            # Markers in flight: whichever end is asked, it is answered once the
            # transaction is complete (Kafka's pending transition): the same end
            # then succeeds, and the client does not lose its producer to a
            # race between its next transaction and this one's markers.
            return Decision(E.CONCURRENT_TRANSACTIONS)
        return Decision(E.INVALID_TXN_STATE)

    # -- markers, timeouts, expiry ------------------------------------------------------

    def complete(self, job: MarkerJob, now_ms: int) -> Decision:
        """Every marker of ``job`` is written: record CompleteCommit/CompleteAbort
        (nothing if the transaction moved on meanwhile)."""
        meta = self.transactions.get(job.transactional_id)
        expected = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if (meta is None or meta.state is not expected or meta.producer_id != job.producer_id
                or meta.producer_epoch != job.producer_epoch):
            return Decision()
        done = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        nxt = TxnMetadata(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                          meta.timeout_ms, done, set(), meta.start_ms, now_ms,
                          meta.last_producer_epoch)
        return Decision(record=nxt.record())

    def abort_expired(self, now_ms: int) -> list[Decision]:
        """Fence and abort every Ongoing transaction older than its timeout."""
        return [self._fence_and_abort(m, now_ms) for m in list(self.transactions.values())
                if m.state is TxnState.ONGOING and m.start_ms + m.timeout_ms <= now_ms]

    def expire_ids(self, now_ms: int) -> list[Decision]:
        """Tombstones for ids idle longer than ``transactional.id.expiration.ms``."""
        idle = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return [Decision(record=TxnRecord(m.transactional_id, None))
                for m in list(self.transactions.values())
                if m.state in idle
                and m.last_update_ms + self.config.id_expiration_ms <= now_ms]

    def next_deadline_ms(self) -> int | None:
        """When the earliest Ongoing transaction times out."""
        ends = [m.start_ms + m.timeout_ms for m in self.transactions.values()
                if m.state is TxnState.ONGOING]
        return min(ends, default=None)

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> Decision:
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH - 1 else (
            meta.producer_epoch)
        nxt = TxnMetadata(meta.transactional_id, meta.producer_id, epoch, meta.timeout_ms,
                          TxnState.PREPARE_ABORT, set(meta.partitions), meta.start_ms,
                          now_ms, meta.producer_epoch)
        return Decision(record=nxt.record(), markers=self._job(nxt))

    # -- views --------------------------------------------------------------------------

    def verify(self, producer_id: int, producer_epoch: int, partition: tuple[str, int]
               ) -> ErrorCode:
        """Is ``partition`` part of this producer's ongoing transaction? (KIP-890's
        verification before a transactional batch or TxnOffsetCommit is accepted.)"""
        tid = self.by_producer.get(producer_id)
        meta = self.transactions.get(tid) if tid is not None else None
        if meta is None:
            return E.INVALID_TXN_STATE
        if producer_epoch != meta.producer_epoch:
            return E.INVALID_PRODUCER_EPOCH
        if meta.state is TxnState.ONGOING and partition in meta.partitions:
            return E.NONE
        return E.INVALID_TXN_STATE

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only`` (what a partition leader
        asks before it takes a transactional batch, KIP-890), as Kafka's
        coordinator answers it: no state change; one error for every partition
        when the id is unknown or held by another producer id
        (INVALID_PRODUCER_ID_MAPPING), the epoch differs (PRODUCER_FENCED) or the
        transaction is being decided (CONCURRENT_TRANSACTIONS); otherwise, per
        partition, NONE if it is in the transaction and TRANSACTION_ABORTABLE if
        it is not."""
        meta = self.transactions.get(transactional_id)
        wanted = list(partitions)
        if meta is None or meta.state is TxnState.DEAD or meta.producer_id != producer_id:
            return dict.fromkeys(wanted, E.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return dict.fromkeys(wanted, E.PRODUCER_FENCED)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(wanted, E.CONCURRENT_TRANSACTIONS)
        return {tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE
                for tp in wanted}

    @staticmethod
    def _producer_error(meta: TxnMetadata | None, producer_id: int, epoch: int) -> ErrorCode:
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.producer_epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    @staticmethod
    def _job(meta: TxnMetadata) -> MarkerJob:
        return MarkerJob(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                         meta.state is TxnState.PREPARE_COMMIT, frozenset(meta.partitions))

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

Transactions v2 (KIP-890 part 2): an EndTxn with ``client_version`` 2 is
decided by :func:`odradek.coordinator.txn.epochs.end_v2` (the epoch bumped at
the prepare step, Kafka's retry rules); an add with ``client_version`` 2 (the
broker's implicit add for Produce v12 / TxnOffsetCommit v5) records it in the
transaction (``ClientTransactionVersion``). The model (states, metadata,
decisions) is :mod:`odradek.coordinator.txn.state`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator.txn import epochs
from odradek.coordinator.txn.records import TxnRecord, partition_for
from odradek.coordinator.txn.state import (
    MAX_EPOCH,
    STATE_BY_NAME,
    Decision,
    MarkerJob,
    TxnMetadata,
    TxnState,
)
from odradek.wire.errors import ErrorCode

E = ErrorCode
__all__ = ["MAX_EPOCH", "STATE_BY_NAME", "Decision", "MarkerJob", "TransactionCoordinator",
           "TxnConfig", "TxnMetadata", "TxnState"]

@dataclass(frozen=True, slots=True)
class TxnConfig:
    """Kafka's broker settings for transactions."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    partitions: int = 50


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.transaction_version = 0
        """The finalized ``transaction.version`` (the shell keeps it current): from
        1 on, records are written as value version 1, as Kafka writes them."""
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
            last_epoch, value.client_transaction_version, value.previous_producer_id,
            value.next_producer_id,
        )

    def pending_markers(self, partition: int | None = None) -> list[MarkerJob]:
        """Marker jobs of every decided, not yet completed transaction (after a load)
        of ``__transaction_state`` partition ``partition`` (None: of every one)."""
        return [epochs.job(m) for m in self.transactions.values()
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
            return self._answer_with(meta, self.flexible)
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
        nxt = meta.moved(producer_epoch=meta.producer_epoch + 1, timeout_ms=timeout_ms,
                         state=TxnState.EMPTY, partitions=set(), start_ms=-1,
                         last_update_ms=now_ms, last_producer_epoch=meta.producer_epoch,
                         next_producer_id=-1)
        if nxt.producer_epoch >= MAX_EPOCH - 1:
            nxt.prev_producer_id = meta.producer_id
            nxt.producer_id, nxt.producer_epoch, nxt.last_producer_epoch = (
                new_producer_id(), 0, -1)
        return self._answer_with(nxt, self.flexible)

    @property
    def flexible(self) -> bool:
        """Records are written as value version 1 (``transaction.version`` >= 1)."""
        return self.transaction_version >= 1

    @staticmethod
    def _answer_with(meta: TxnMetadata, flexible: bool) -> Decision:
        return Decision(record=meta.record(flexible), producer_id=meta.producer_id,
                        producer_epoch=meta.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------

    def add_partitions(
        self, tid: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]], now_ms: int, client_version: int = -1,
    ) -> Decision:
        """Add ``partitions`` to the producer's transaction (opening one if none is
        ongoing). ``client_version`` 2 is a transactions v2 add (Produce v12 or
        TxnOffsetCommit v5 adding implicitly): recorded with the transaction; -1
        keeps the one it has."""
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
        version = meta.client_version if client_version < 0 else client_version
        if (meta.state is TxnState.ONGOING and wanted <= meta.partitions
                and version == meta.client_version):
            return Decision()
        ongoing = meta.state is TxnState.ONGOING
        nxt = meta.moved(state=TxnState.ONGOING,
                         partitions=(meta.partitions if ongoing else set()) | wanted,
                         start_ms=meta.start_ms if ongoing else now_ms,
                         last_update_ms=now_ms, client_version=version)
        return Decision(record=nxt.record(self.flexible))

    # -- EndTxn -------------------------------------------------------------------------

    def end_transaction(
        self, tid: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
        client_version: int = 0, new_producer_id: Callable[[], int] | None = None,
    ) -> Decision:
        """EndTxn. ``client_version`` 2 (EndTxn v5 with ``transaction.version`` >= 2
        finalized) ends it as transactions v2 does (:func:`epochs.end_v2`: the
        epoch bumped, the new producer id and epoch in the decision; an
        exhausted epoch takes a producer id from ``new_producer_id``)."""
        meta = self.transactions.get(tid)
        if client_version >= 2 and meta is not None:
            assert new_producer_id is not None, "transactions v2 may need a producer id"
            return epochs.end_v2(meta, producer_id, producer_epoch, commit, now_ms,
                                 new_producer_id, self.flexible)
        problem = self._producer_error(meta, producer_id, producer_epoch)
        if problem:
            return Decision(problem)
        assert meta is not None
        state = meta.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            nxt = meta.moved(state=target, last_update_ms=now_ms, client_version=client_version)
            return Decision(record=nxt.record(self.flexible), markers=epochs.job(nxt))
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
        return Decision(record=epochs.completed(meta, now_ms).record(self.flexible))

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
        nxt = meta.moved(producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                         last_update_ms=now_ms, last_producer_epoch=meta.producer_epoch)
        return Decision(record=nxt.record(self.flexible), markers=epochs.job(nxt))

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

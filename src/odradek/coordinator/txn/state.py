"""The transaction coordinator's model: states, one transactional id's
metadata (what a ``__transaction_state`` value holds), and the decisions the
pure coordinator returns (:mod:`odradek.coordinator.txn.coordinator`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.coordinator.txn.records import TxnRecord, partitions_schema
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
    client_version: int = 0
    """The transaction version its client runs (``ClientTransactionVersion``:
    2 once it ends transactions with EndTxn v5, transactions v2)."""
    prev_producer_id: int = -1
    """The producer id before an exhausted epoch made a new one (``PreviousProducerId``)."""
    next_producer_id: int = -1
    """While a transactions v2 end whose epoch is exhausted is prepared: the
    producer id the transaction completes with (``NextProducerId``)."""

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            previous_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_version,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            transaction_partitions=(None if self.state is TxnState.EMPTY
                                    else partitions_schema(self.partitions)),
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
        )

    def record(self, flexible: bool = False) -> TxnRecord:
        """This state as a record: value version 1 when ``flexible`` (Kafka's rule:
        ``transaction.version`` >= 1 finalized) or when a field only version 1
        holds is set, else version 0."""
        v1 = flexible or self.client_version > 0 or (
            self.prev_producer_id, self.next_producer_id) != (-1, -1)
        return TxnRecord(self.transactional_id, self.to_value(), 1 if v1 else 0)

    def moved(self, **changes: object) -> TxnMetadata:
        """A copy with ``changes`` (the partitions set copied, never shared)."""
        nxt = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        if "partitions" not in changes:
            nxt.partitions = set(self.partitions)
        return nxt


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

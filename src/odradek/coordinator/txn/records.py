"""The records of ``__transaction_state``, in Kafka's own format.

Key: int16 version 0, then ``TransactionLogKey`` v0 (the transactional id).
Value: int16 version 0, then ``TransactionLogValue`` v0 (producer id and epoch,
timeout, status byte, partitions — null while Empty —, last update and start
timestamps), from ``../shared/kafka-protocol/internal/transaction-coordinator``.
Version 1 (flexible: tagged ``PreviousProducerId`` 0, ``NextProducerId`` 1
and ``ClientTransactionVersion`` 2) is written once ``transaction.version``
>= 1 is finalized, as Kafka writes it, and whenever one of those fields is
set (a transactions v2 client); both are read. A null value is a tombstone: the id expired. A
transactional id lives in partition ``abs(javaHashCode(id)) %
transaction.state.log.num.partitions``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from odradek.coordinator.records import partition_for
from odradek.wire.internal.transaction_log_key import TransactionLogKey
from odradek.wire.internal.transaction_log_value import PartitionsSchema, TransactionLogValue
from odradek.wire.primitives import DecodeError

TXN_TOPIC: Final = "__transaction_state"
_VERSION: Final = struct.Struct(">h")
KEY_VERSION: Final = 0

__all__ = ["TXN_TOPIC", "TxnRecord", "decode", "encode", "partition_for"]


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One record: a transactional id and its metadata (None: tombstone)."""

    transactional_id: str
    value: TransactionLogValue | None
    version: int = 0
    """The value's version (0 or 1); a decoded record keeps the one it was written at."""


def encode(record: TxnRecord) -> tuple[bytes, bytes | None]:
    key = _VERSION.pack(KEY_VERSION) + TransactionLogKey(
        transactional_id=record.transactional_id).encode(KEY_VERSION)
    if record.value is None:
        return key, None
    return key, _VERSION.pack(record.version) + record.value.encode(record.version)


def decode(key: bytes, value: bytes | None) -> TxnRecord:
    if len(key) < 2:
        raise DecodeError("transaction log key shorter than its version")
    (kv,) = _VERSION.unpack_from(key, 0)
    if kv != 0:
        raise DecodeError(f"unknown transaction log key version {kv}")
    tid = TransactionLogKey.decode(memoryview(key)[2:], 0).transactional_id
    if value is None:
        return TxnRecord(tid, None)
    if len(value) < 2:
        raise DecodeError("transaction log value shorter than its version")
    (vv,) = _VERSION.unpack_from(value, 0)
    if vv not in (0, 1):
        raise DecodeError(f"unknown transaction log value version {vv}")
    return TxnRecord(tid, TransactionLogValue.decode(memoryview(value)[2:], vv), vv)


def partitions_schema(partitions: set[tuple[str, int]]) -> list[PartitionsSchema]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return [PartitionsSchema(topic=t, partition_ids=ids) for t, ids in by_topic.items()]

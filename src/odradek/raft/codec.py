"""Raft entries as Kafka RecordBatch v2, the form they take on disk and in Fetch.

One entry is one batch: ``baseOffset`` = the entry's offset, one record per
entry record (null key, the record bytes as value), ``partitionLeaderEpoch`` =
the entry's epoch. A control entry (the LeaderChange a new leader writes) is a
control batch whose record key is Kafka's control key for LEADER_CHANGE
(version 0, type 2).
"""

from __future__ import annotations

import struct

from odradek.raft.log import Entry
from odradek.wire.records import Record, build_batch, decode_batches

LEADER_CHANGE_TYPE = 2
_CONTROL_KEY = struct.Struct(">hh").pack(0, LEADER_CHANGE_TYPE)


def encode_entry(entry: Entry, timestamp_ms: int) -> bytes:
    key = _CONTROL_KEY if entry.control else None
    records = [Record(entry.offset + i, timestamp_ms, key, value)
               for i, value in enumerate(entry.records)]
    return build_batch(records, base_offset=entry.offset, control=entry.control,
                       partition_leader_epoch=entry.epoch)


def encode_entries(entries: list[Entry] | tuple[Entry, ...], timestamp_ms: int) -> bytes:
    return b"".join(encode_entry(e, timestamp_ms) for e in entries)


def decode_entries(data: bytes | memoryview) -> list[Entry]:
    """Every complete batch of ``data`` (DecodeError/CorruptBatchError on damage)."""
    out: list[Entry] = []
    for header, records in decode_batches(data):
        values = tuple(r.value or b"" for r in records)
        if values:
            out.append(Entry(header.base_offset, header.partition_leader_epoch, values,
                             control=header.is_control))
    return out

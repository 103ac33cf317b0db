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
from odradek.wire.batch import CorruptBatchError
from odradek.wire.primitives import Buffer
from odradek.wire.records import Record, build_batch, decode_batch

LEADER_CHANGE_TYPE = 2
_CONTROL_KEY = struct.Struct(">hh").pack(0, LEADER_CHANGE_TYPE)


def encode_entry(entry: Entry, timestamp_ms: int = 0) -> bytes:
    key = _CONTROL_KEY if entry.control else None
    records = [Record(entry.offset + i, timestamp_ms, key, value)
               for i, value in enumerate(entry.records)]
    return build_batch(records, base_offset=entry.offset, control=entry.control,
                       partition_leader_epoch=entry.epoch)


def encode_entries(entries: list[Entry] | tuple[Entry, ...], timestamp_ms: int = 0) -> bytes:
    return b"".join(encode_entry(e, timestamp_ms) for e in entries)


def decode_entry(buf: Buffer, pos: int) -> tuple[Entry, int]:
    """(entry, batch size) of the batch at ``pos``; DecodeError (CorruptBatchError)
    if it is torn, damaged, or not an entry (no records, offset gaps, a null value)."""
    header, records = decode_batch(buf, pos)
    if not records or header.last_offset_delta != len(records) - 1:
        raise CorruptBatchError("not an entry batch (no records, or offset gaps)")
    values: list[bytes] = []
    for k, record in enumerate(records):
        if record.offset != header.base_offset + k or record.value is None:
            raise CorruptBatchError(f"record {k} is not an entry record")
        values.append(record.value)
    entry = Entry(header.base_offset, header.partition_leader_epoch, tuple(values),
                  header.is_control)
    return entry, header.size


def decode_entries(data: Buffer) -> list[Entry]:
    """Every batch of ``data``, each an entry (DecodeError on damage)."""
    out: list[Entry] = []
    pos = 0
    while pos < len(data):
        entry, size = decode_entry(data, pos)
        out.append(entry)
        pos += size
    return out

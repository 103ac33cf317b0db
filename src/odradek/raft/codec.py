"""Raft entries as Kafka RecordBatch v2, the form they take on disk and in Fetch.

One entry is one batch: ``baseOffset`` = the entry's offset, one record per
entry record (null key, the record bytes as value), ``partitionLeaderEpoch`` =
the entry's epoch. A control entry (the LeaderChange a new leader writes) is a
control batch; each record's key is Kafka's control key (version 0, type):
LEADER_CHANGE (2), or for a record the core tags (:mod:`odradek.raft.voters`)
KRAFT_VOTERS (6) / KRAFT_VERSION (5), the value then the untagged body.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from odradek.raft.log import Entry
from odradek.raft.voters import (
    KRAFT_VERSION_CONTROL_TYPE,
    KRAFT_VERSION_TAG,
    VOTERS_CONTROL_TYPE,
    VOTERS_TAG,
)
from odradek.wire.batch import BATCH_HEADER_SIZE, BatchHeader, CorruptBatchError, validate_batch
from odradek.wire.primitives import Buffer
from odradek.wire.records import Record, build_batch, decode_batch, read_record_varint

LEADER_CHANGE_TYPE = 2
_KEY = struct.Struct(">hh")
_CONTROL_KEY = _KEY.pack(0, LEADER_CHANGE_TYPE)
_TAGS = {VOTERS_CONTROL_TYPE: VOTERS_TAG, KRAFT_VERSION_CONTROL_TYPE: KRAFT_VERSION_TAG}


def _control(value: bytes) -> tuple[bytes, bytes]:
    """(control key, on-disk value) of a control entry's record."""
    for kind, tag in _TAGS.items():
        if value.startswith(tag):
            return _KEY.pack(0, kind), value[len(tag):]
    return _CONTROL_KEY, value


def encode_entry(entry: Entry, timestamp_ms: int = 0) -> bytes:
    records = []
    for i, value in enumerate(entry.records):
        key, body = _control(value) if entry.control else (None, value)
        records.append(Record(entry.offset + i, timestamp_ms, key, body))
    return build_batch(records, base_offset=entry.offset, control=entry.control,
                       partition_leader_epoch=entry.epoch)


def encode_entries(entries: Sequence[Entry], timestamp_ms: int = 0) -> bytes:
    return b"".join(encode_entry(e, timestamp_ms) for e in entries)


def decode_entry(buf: Buffer, pos: int) -> tuple[Entry, int]:
    """(entry, batch size) of the batch at ``pos``; DecodeError (CorruptBatchError)
    if it is torn, damaged, or not an entry (no records, offset gaps, a null value)."""
    header = validate_batch(buf, pos)
    if not header.is_control and not header.compression:
        values = _plain_values(buf, pos, header)
        if values is not None:
            return Entry(header.base_offset, header.partition_leader_epoch, values), header.size
    return _decode_entry(buf, pos)


def _plain_values(buf: Buffer, pos: int, header: BatchHeader) -> tuple[bytes, ...] | None:
    """The values of an uncompressed data batch whose records are as this
    module writes them (offset delta k for the k-th, a null key, no headers),
    read without building a Record each: a restart at 100k partitions reads
    ~200k of them on each node. None: a batch of another shape, for the general
    path to decode (or refuse). CorruptBatchError: not an entry batch."""
    count = header.records_count
    if count < 1 or header.last_offset_delta != count - 1:
        raise CorruptBatchError("not an entry batch (no records, or offset gaps)")
    data = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE:pos + header.size])
    values: list[bytes] = []
    p = 0
    try:
        for k in range(count):
            length, p = read_record_varint(data, p)
            end = p + length
            # attributes (1 byte), then the timestamp delta (a varlong, skipped)
            q = p + 1
            while data[q] & 0x80:
                q += 1
            delta, q = read_record_varint(data, q + 1)
            if delta != k or data[q] != 1:  # 1: the zigzag of -1, a null key
                return None
            size, q = read_record_varint(data, q + 1)
            if size < 0:
                raise CorruptBatchError(f"record {k} is not an entry record")
            value_end = q + size
            if value_end >= end or data[value_end] != 0 or value_end + 1 != end:
                return None  # headers, or a length that disagrees: the general path
            values.append(data[q:value_end])
            p = end
    except IndexError:
        return None
    return tuple(values) if p == len(data) else None


def _decode_entry(buf: Buffer, pos: int) -> tuple[Entry, int]:
    header, records = decode_batch(buf, pos)
    if not records or header.last_offset_delta != len(records) - 1:
        raise CorruptBatchError("not an entry batch (no records, or offset gaps)")
    values: list[bytes] = []
    for k, record in enumerate(records):
        if record.offset != header.base_offset + k or record.value is None:
            raise CorruptBatchError(f"record {k} is not an entry record")
        value = bytes(record.value)
        if header.is_control and record.key is not None and len(record.key) >= 4:
            value = _TAGS.get(_KEY.unpack_from(record.key)[1], b"") + value
        values.append(value)
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

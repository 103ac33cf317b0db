"""A tiny RecordBatch v2 builder for storage tests (records encoded for real, so
kafka-python can decode what we store)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint(value: int) -> bytes:
    return _uvarint((value << 1) ^ (value >> 63))


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(ts_delta)
    body += _varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += _varint(-1)
        else:
            body += _varint(len(field)) + field
    body += _varint(0)  # headers
    return _varint(len(body)) + bytes(body)


def make_batch(
    values: Sequence[bytes | None],
    *,
    timestamps: Sequence[int] | int = 1_700_000_000_000,
    base_offset: int = 0,
    keys: Sequence[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    records_count: int | None = None,
) -> bytes:
    n = len(values)
    stamps = [timestamps] * n if isinstance(timestamps, int) else list(timestamps)
    first_ts = stamps[0] if stamps else -1
    keys = keys if keys is not None else [None] * n
    records = b"".join(_record(i, stamps[i] - first_ts, keys[i], values[i]) for i in range(n))
    lod = n - 1 if last_offset_delta is None else last_offset_delta
    count = n if records_count is None else records_count
    max_ts = max(stamps) if stamps else -1
    header = _HEADER.pack(
        base_offset,
        49 + len(records),
        leader_epoch,
        2,
        0,
        attributes,
        lod,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    batch = bytearray(header + records)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)

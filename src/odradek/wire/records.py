"""Records inside a RecordBatch v2: decoding, building and control records.

The 61-byte batch header is :mod:`odradek.wire.batch`'s business; this module
reads and writes what follows it. That section is compressed as one blob when
the header's attributes name a codec (:mod:`odradek.wire.compression`); once
decompressed it is ``recordsCount`` records back to back, each::

    length          varint   bytes of the record after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - baseTimestamp
    offsetDelta     varint   offset - baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headersCount    varint
    headers         headersCount times:
        headerKeyLength    varint   >= 0
        headerKey          UTF-8
        headerValueLength  varint   -1 = null value
        headerValue        bytes

varint/varlong are zigzag-encoded protobuf varints (see
:mod:`odradek.wire.primitives`). With the LogAppendTime bit set in the batch
attributes every record's timestamp is the header's maxTimestamp, whatever
its delta says, as Kafka's clients read it.

Decoding is strict: the CRC must match, every record must fill exactly its
length, offset deltas must rise strictly within ``[0, lastOffsetDelta]``
(compaction leaves gaps, never disorder), the count must match and no byte
may trail the last record. Any violation raises :class:`DecodeError` (or its
subclass :class:`CorruptBatchError`); no length is trusted before it is
checked against the bytes that remain.

A control batch (attributes bit 5) holds one control record whose key is::

    version  int16  0
    type     int16  0 = abort, 1 = commit

and, for those two types, whose value is ``version int16, coordinatorEpoch int32``.

Decoding is off the broker's hot path (the broker only validates headers), so
this favours clarity over speed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from odradek.wire.batch import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    encode_batch_header,
    validate_batch,
)
from odradek.wire.compression import CODEC_NAMES, compress, decompress
from odradek.wire.primitives import (
    Buffer,
    DecodeError,
    EncodeError,
    read_varint,
    read_varlong,
    write_varint,
    write_varlong,
)

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024

CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1

# length + attributes + timestampDelta + offsetDelta + key/value lengths + headersCount
_MIN_RECORD_BYTES: Final = 7
_CONTROL_KEY: Final = struct.Struct(">hh")
_END_TXN_VALUE: Final = struct.Struct(">hi")
_INT32_MAX: Final = 0x7FFFFFFF

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    attributes: int = 0


# -- decoding ------------------------------------------------------------------


def detect_magic(buf: Buffer, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at ``pos`` (offset 16 in all formats)."""
    if pos < 0 or pos + MAGIC_OFFSET >= len(buf):
        raise DecodeError(f"short input reading the magic byte at offset {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    return magic - 256 if magic > 127 else magic


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, list[Record]]:
    """Validate the v2 batch at ``pos`` and decode all its records."""
    header, records, _ = _decode_batch_at(buf, pos, max_decompressed_bytes)
    return header, records


def decode_batches(
    buf: Buffer, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> list[tuple[BatchHeader, list[Record]]]:
    """Decode a records field made only of complete v2 batches.

    ``max_decompressed_bytes`` bounds the decompressed bytes of all batches together.
    """
    out: list[tuple[BatchHeader, list[Record]]] = []
    pos = 0
    budget = max_decompressed_bytes
    while pos < len(buf):
        header, records, inflated = _decode_batch_at(buf, pos, budget)
        budget -= inflated
        out.append((header, records))
        pos += header.size
    return out


def _decode_batch_at(
    buf: Buffer, pos: int, max_decompressed_bytes: int
) -> tuple[BatchHeader, list[Record], int]:
    """(header, records, bytes produced by decompression) of the batch at ``pos``."""
    header = validate_batch(buf, pos)
    records, inflated = decode_records(buf, pos, header, max_decompressed_bytes)
    return header, records, inflated


def decode_records(
    buf: Buffer, pos: int, header: BatchHeader,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[list[Record], int]:
    """The records of the batch at ``pos`` whose header, already read and checked
    (framing, magic, CRC), is ``header``, and the bytes decompression produced."""
    body = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    if not header.compression:
        return _decode_records(body.tobytes(), header), 0
    data = decompress(header.compression, body, max_decompressed_bytes)
    return _decode_records(data, header), len(data)


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    count = header.records_count
    if count > len(data) // _MIN_RECORD_BYTES:
        raise CorruptBatchError(f"{count} records cannot fit in {len(data)} bytes")
    fixed_timestamp = header.max_timestamp if header.log_append_time else None
    records: list[Record] = []
    pos = 0
    previous_delta = -1
    for _ in range(count):
        record, pos = _decode_record(data, pos, header, fixed_timestamp)
        delta = record.offset - header.base_offset
        if not previous_delta < delta <= header.last_offset_delta:
            raise CorruptBatchError(
                f"offset delta {delta} after {previous_delta} outside "
                f"[0, lastOffsetDelta={header.last_offset_delta}]"
            )
        previous_delta = delta
        records.append(record)
    if pos != len(data):
        raise CorruptBatchError(f"{len(data) - pos} bytes left after {count} records")
    return records


class RecordSpan(NamedTuple):
    """Where one record is in a batch's (decompressed) records section."""

    offset: int
    key: bytes | None
    null_value: bool
    start: int
    end: int


def scan_batch(
    buf: Buffer, pos: int = 0, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, bytes, list[RecordSpan]]:
    """The batch at ``pos``: its header, its records section (decompressed) and
    each record's offset, key, whether its value is null, and its byte span,
    without building records: values and headers are skipped by each record's
    length (what the cleaner decides on, and copies from)."""
    header = validate_batch(buf, pos)
    body = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    data = (body.tobytes() if not header.compression
            else decompress(header.compression, body, max_decompressed_bytes))
    out: list[RecordSpan] = []
    p = 0
    size = len(data)
    base = header.base_offset
    try:
        # The one-byte varints that dominate are decoded inline: this loop is
        # the cleaner's inner loop (once for the map, once for the rewrite).
        for _ in range(header.records_count):
            start = p
            b = data[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                length, p = read_record_varint(data, p)
            end = p + length
            if length < _MIN_RECORD_BYTES - 1 or end > size:
                raise CorruptBatchError(f"record length {length} at offset {p} does not fit")
            p += 1  # attributes
            if data[p] < 0x80:  # timestamp delta
                p += 1
            else:
                _, p = read_varlong(data, p)
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = read_record_varint(data, p)
            b = data[p]
            if b < 0x80:
                key_length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_length, p = read_record_varint(data, p)
            if key_length == -1:
                key = None
            elif key_length < 0 or p + key_length > end:
                raise CorruptBatchError(f"key of length {key_length} overruns its record")
            else:
                key = data[p:p + key_length]
                p += key_length
            if p >= end:
                raise CorruptBatchError(f"record at {start} ends before its value")
            out.append(RecordSpan(base + offset_delta, key, data[p] == 0x01, start, end))
            p = end
    except IndexError:
        raise CorruptBatchError("a record runs past its batch") from None
    if p != size:
        raise CorruptBatchError(f"{size - p} bytes left after {header.records_count} records")
    return header, data, out


def batch_keys(
    buf: Buffer, pos: int = 0, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, list[tuple[int, bytes | None, bool]]]:
    """(offset, key, value is null) of each record of the batch at ``pos``."""
    header, _, spans = scan_batch(buf, pos, max_decompressed_bytes)
    return header, [(s.offset, s.key, s.null_value) for s in spans]


def keep_records(
    header: BatchHeader, data: bytes, kept: Sequence[RecordSpan],
    compression_level: int | None = None,
) -> bytes:
    """The batch again with only the ``kept`` records, copied byte for byte: their
    offset and timestamp deltas stay right because the base offset and base
    timestamp do not change (nor lastOffsetDelta, maxTimestamp, producer,
    sequence, codec, leader epoch). Compressed again with the batch's codec."""
    if not kept:
        raise EncodeError("a batch needs at least one record")
    body: bytes = b"".join(data[s.start:s.end] for s in kept)
    if header.compression:
        body = compress(header.compression, body, compression_level)
    rebuilt = replace(header, batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
                      records_count=len(kept), crc=0)
    head = encode_batch_header(rebuilt)
    crc = compute_crc(head + body, 0, len(head) + len(body))
    return encode_batch_header(replace(rebuilt, crc=crc)) + body


def read_record_varint(data: bytes, pos: int) -> tuple[int, int]:
    """read_varint with fast paths for the one- and two-byte values that dominate
    records (lengths under 8 KiB, offset deltas under 8192)."""
    if pos + 1 < len(data):
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = data[pos + 1]
        if second < 0x80:
            value = (byte & 0x7F) | (second << 7)
            return (value >> 1) ^ -(value & 1), pos + 2
    return read_varint(data, pos)


def _decode_record(
    data: bytes, pos: int, header: BatchHeader, fixed_timestamp: int | None
) -> tuple[Record, int]:
    length, pos = read_record_varint(data, pos)
    end = pos + length
    if length < _MIN_RECORD_BYTES - 1 or end > len(data):
        raise CorruptBatchError(f"record length {length} at offset {pos} does not fit")
    attributes = data[pos]
    attributes -= 256 if attributes > 127 else 0
    timestamp_delta, pos = read_varlong(data, pos + 1)
    offset_delta, pos = read_record_varint(data, pos)
    key, pos = _read_field(data, pos, end, "key")
    value, pos = _read_field(data, pos, end, "value")
    headers, pos = _read_headers(data, pos, end)
    if pos != end:
        raise CorruptBatchError(f"record fields end at {pos}, its length says {end}")
    timestamp = header.base_timestamp + timestamp_delta
    record = Record(
        offset=header.base_offset + offset_delta,
        timestamp=timestamp if fixed_timestamp is None else fixed_timestamp,
        key=key,
        value=value,
        headers=headers,
        attributes=attributes,
    )
    return record, pos


def _read_field(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    """varint length (-1 = null) then bytes, all inside ``[pos, end)``."""
    length, pos = read_record_varint(data, pos)
    if length == -1:
        return None, pos
    stop = pos + length
    if length < 0 or stop > end:
        raise CorruptBatchError(f"{what} of length {length} at offset {pos} overruns its record")
    return data[pos:stop], stop


def _read_headers(data: bytes, pos: int, end: int) -> tuple[Headers, int]:
    count, pos = read_record_varint(data, pos)
    # Each header takes at least two bytes (two one-byte lengths).
    if count < 0 or pos + 2 * count > end:
        raise CorruptBatchError(f"header count {count} at offset {pos} does not fit its record")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        raw_key, pos = _read_field(data, pos, end, "header key")
        if raw_key is None:
            raise CorruptBatchError(f"null header key before offset {pos}")
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptBatchError(f"header key is not UTF-8 before offset {pos}") from exc
        value, pos = _read_field(data, pos, end, "header value")
        headers.append((key, value))
    return tuple(headers), pos


# -- control records -------------------------------------------------------------


def control_record_type(record: Record) -> int:
    """The type in a control record's key: :data:`CONTROL_ABORT`, :data:`CONTROL_COMMIT`, ..."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise DecodeError("control record key shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise DecodeError(f"negative control record key version {version}")
    result: int = kind
    return result


def read_marker(buf: Buffer, pos: int = 0, header: BatchHeader | None = None
                ) -> tuple[int, int]:
    """(type, coordinator epoch) of the control batch at ``pos`` (its first record);
    ``header``: the batch's header, already read and checked. Raises DecodeError
    if it holds no readable control record."""
    if header is None:
        _, records = decode_batch(buf, pos)
    else:
        records, _ = decode_records(buf, pos, header)
    if not records:
        raise DecodeError("control batch without records")
    kind = control_record_type(records[0])
    value = records[0].value
    epoch = -1
    if value is not None and len(value) >= _END_TXN_VALUE.size:
        epoch = _END_TXN_VALUE.unpack_from(value, 0)[1]
    return kind, epoch


def control_record(
    kind: int, *, offset: int, timestamp: int, coordinator_epoch: int = 0
) -> Record:
    """An end-transaction marker (abort or commit) for a control batch."""
    return Record(
        offset=offset,
        timestamp=timestamp,
        key=_CONTROL_KEY.pack(0, kind),
        value=_END_TXN_VALUE.pack(0, coordinator_epoch),
    )


# -- building ------------------------------------------------------------------


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch with a correct CRC.

    Record offsets must rise strictly from ``base_offset`` (gaps are allowed,
    as after compaction); baseTimestamp is the first record's timestamp and
    maxTimestamp the largest. The records section is always compressed when a
    codec is given, even if that makes it larger. The cleaner keeps a batch's
    ``last_offset_delta`` and ``max_timestamp`` when it drops records, and
    sets ``delete_horizon_ms`` (KIP-534: attribute bit 6, the horizon as
    baseTimestamp, record timestamps as deltas from it).
    """
    if not records:
        raise EncodeError("a batch needs at least one record")
    if compression not in CODEC_NAMES:
        raise EncodeError(f"unknown compression codec {compression}")
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    body = bytearray()
    previous = base_offset - 1
    for record in records:
        if record.offset <= previous:
            raise EncodeError(f"record offset {record.offset} does not follow {previous}")
        previous = record.offset
        _encode_record(body, record, record.offset - base_offset, base_timestamp)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset
    elif last_offset_delta < records[-1].offset - base_offset:
        raise EncodeError(f"lastOffsetDelta {last_offset_delta} is before the last record")
    if last_offset_delta > _INT32_MAX:
        raise EncodeError(f"lastOffsetDelta {last_offset_delta} exceeds int32")
    if compression:
        body = bytearray(compress(compression, body, compression_level))
    attributes = compression
    attributes |= ATTR_TIMESTAMP_TYPE if log_append_time else 0
    attributes |= ATTR_TRANSACTIONAL if transactional else 0
    attributes |= ATTR_CONTROL if control else 0
    attributes |= ATTR_DELETE_HORIZON if delete_horizon_ms is not None else 0
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch=partition_leader_epoch,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=(max(r.timestamp for r in records) if max_timestamp is None
                       else max_timestamp),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )
    batch = encode_batch_header(header) + body
    crc = compute_crc(batch, 0, len(batch))
    return encode_batch_header(replace(header, crc=crc)) + body


def empty_batch(header: BatchHeader) -> bytes:
    """A batch with no records that keeps ``header``'s offsets, producer id, epoch,
    sequence, timestamps and leader epoch (uncompressed): what the cleaner leaves
    where a producer's last batch lost every record, so the producer's state
    survives (Kafka does the same)."""
    attributes = header.attributes & ~0x07
    empty = replace(header, batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD,
                    attributes=attributes, records_count=0, crc=0)
    data = encode_batch_header(empty)
    return encode_batch_header(replace(empty, crc=compute_crc(data, 0, len(data))))


def _encode_record(out: bytearray, record: Record, offset_delta: int, base_timestamp: int) -> None:
    if not -128 <= record.attributes <= 127:
        raise EncodeError(f"record attributes {record.attributes} exceed int8")
    inner = bytearray()
    inner.append(record.attributes & 0xFF)
    write_varlong(inner, record.timestamp - base_timestamp)
    write_varint(inner, offset_delta)
    _write_field(inner, record.key)
    _write_field(inner, record.value)
    write_varint(inner, len(record.headers))
    for key, value in record.headers:
        _write_field(inner, key.encode("utf-8"))
        _write_field(inner, value)
    write_varint(out, len(inner))
    out += inner


def _write_field(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        write_varint(out, -1)
        return
    write_varint(out, len(value))
    out += value


def first_record_at_or_after(batch: bytes, target_timestamp: int) -> tuple[int, int] | None:
    """Offset and timestamp of the first record with timestamp >= target (ListOffsets)."""
    _, records = decode_batch(batch)
    for r in records:
        if r.timestamp >= target_timestamp:
            return r.offset, r.timestamp
    return None

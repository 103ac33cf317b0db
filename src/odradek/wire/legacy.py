"""Legacy message sets (magic 0 and 1), decoded for inspection only.

Odradek never writes these and the broker refuses them on produce; they are
read to look at old segment files and at what very old clients send. A message
set is entries back to back, with no count in front::

    offset  size  field
         0     8  offset       int64
         8     4  messageSize  int32   bytes after this field
        12     4  crc          uint32  CRC-32 (zlib's, not CRC-32C) of [16, end)
        16     1  magic        int8    0 or 1
        17     1  attributes   int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy,
                                       3 lz4), bit 3 timestamp type (magic 1,
                                       1 = LogAppendTime)
        18     8  timestamp    int64   magic 1 only
         -     4  keyLength    int32   -1 = null
         -     -  key
         -     4  valueLength  int32   -1 = null
         -     -  value

A compressed entry (a "wrapper") carries a whole inner message set,
compressed, as its value. Inner entries are never compressed again and have
the wrapper's magic. For magic 0 inner offsets are absolute. For magic 1 they
are relative: the wrapper's offset is that of the last inner message, so
``absolute = wrapper offset - last inner offset + inner offset``; when that
base comes out negative (a set fresh from a producer, wrapper offset 0) the
inner offsets are kept as written, as Kafka's clients do. If a magic-1
wrapper is LogAppendTime, every inner message takes the wrapper's timestamp
(and the timestamp-type bit in its returned attributes).

Magic-0 lz4 data carries the KAFKA-3160 header checksum, which
:mod:`odradek.wire.compression` repairs before decoding.

Decoded messages are :class:`odradek.wire.records.Record` values with no
headers, ``timestamp = -1`` for magic 0, and the message's own attributes.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from odradek.wire.batch import LOG_OVERHEAD, CorruptBatchError
from odradek.wire.compression import LZ4, decompress
from odradek.wire.primitives import Buffer, DecodeError
from odradek.wire.records import DEFAULT_MAX_DECOMPRESSED_BYTES, Record

_ENTRY: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_CRC_START: Final = 16
_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE: Final = 0x08
_LEGACY_CODECS: Final = (1, 2, 3)
NO_TIMESTAMP: Final = -1
# crc + magic + attributes + (timestamp) + two int32 lengths
_MIN_MESSAGE_SIZE: Final = {0: 14, 1: 22}


def decode_legacy_message_set(
    buf: Buffer,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    *,
    allow_partial_tail: bool = False,
) -> list[Record]:
    """Decode every message of a magic 0/1 message set, unwrapping compressed ones.

    ``max_decompressed_bytes`` bounds all decompression in the set together.
    With ``allow_partial_tail`` a cut-off last entry (normal at the end of a
    fetch response) is ignored instead of raising :class:`DecodeError`.
    """
    view = memoryview(buf)
    records: list[Record] = []
    budget = [max_decompressed_bytes]
    pos = 0
    while pos < len(view):
        if allow_partial_tail and not _entry_complete(view, pos):
            break
        pos = _decode_entry(view, pos, records, budget)
    return records


def _entry_complete(view: memoryview, pos: int) -> bool:
    if pos + LOG_OVERHEAD > len(view):
        return False
    size: int = _I32.unpack_from(view, pos + 8)[0]
    return size < 0 or pos + LOG_OVERHEAD + size <= len(view)


def _decode_entry(view: memoryview, pos: int, out: list[Record], budget: list[int]) -> int:
    """Append the message(s) of the entry at ``pos`` to ``out``; return the next position."""
    record, magic, end = _read_message(view, pos)
    if record.attributes & _CODEC_MASK:
        out += _unwrap(record, magic, budget)
    else:
        out.append(record)
    return end


def _read_message(view: memoryview, pos: int) -> tuple[Record, int, int]:
    """(message, magic, next position) of the entry at ``pos``; a wrapper keeps its value."""
    if pos + _ENTRY.size > len(view):
        raise DecodeError(f"short input reading a legacy message at offset {pos}")
    offset, size, crc, magic, attributes = _ENTRY.unpack_from(view, pos)
    if magic not in _MIN_MESSAGE_SIZE:
        raise CorruptBatchError(f"legacy message at offset {pos} has magic {magic}")
    if size < _MIN_MESSAGE_SIZE[magic]:
        raise CorruptBatchError(f"legacy message size {size} at offset {pos} is too small")
    end = pos + LOG_OVERHEAD + size
    if end > len(view):
        raise DecodeError(f"legacy message at offset {pos} claims {size} bytes beyond the input")
    computed = zlib.crc32(view[pos + _CRC_START : end])
    if computed != crc:
        raise CorruptBatchError(f"legacy CRC mismatch: stored {crc:#x}, computed {computed:#x}")
    cursor = pos + _ENTRY.size
    timestamp = NO_TIMESTAMP
    if magic == 1:
        timestamp = _I64.unpack_from(view, cursor)[0]
        cursor += 8
    key, cursor = _read_bytes(view, cursor, end, "key")
    value, cursor = _read_bytes(view, cursor, end, "value")
    if cursor != end:
        raise CorruptBatchError(f"legacy message at offset {pos} has {end - cursor} extra bytes")
    return Record(offset, timestamp, key, value, (), attributes), magic, end


def _read_bytes(view: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptBatchError(f"legacy {what} length at offset {pos} overruns its message")
    length = _I32.unpack_from(view, pos)[0]
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise CorruptBatchError(f"legacy {what} of length {length} overruns its message")
    return view[pos : pos + length].tobytes(), pos + length


def _unwrap(wrapper: Record, magic: int, budget: list[int]) -> list[Record]:
    codec = wrapper.attributes & _CODEC_MASK
    if codec not in _LEGACY_CODECS:
        raise DecodeError(f"codec {codec} is not valid in a magic {magic} message")
    if wrapper.value is None:
        raise CorruptBatchError(f"compressed legacy wrapper at {wrapper.offset} has a null value")
    data = decompress(
        codec, wrapper.value, budget[0], lz4_fix_header_checksum=(codec == LZ4 and magic == 0)
    )
    budget[0] -= len(data)
    inner_view = memoryview(data)
    inner: list[Record] = []
    pos = 0
    while pos < len(inner_view):
        record, inner_magic, pos = _read_message(inner_view, pos)
        if record.attributes & _CODEC_MASK:
            raise CorruptBatchError(f"nested compression inside wrapper at {wrapper.offset}")
        if inner_magic != magic:
            raise CorruptBatchError(f"inner magic differs from wrapper magic {magic}")
        inner.append(record)
    if magic == 0 or not inner:
        return inner
    return _absolute(wrapper, inner)


def _absolute(wrapper: Record, inner: list[Record]) -> list[Record]:
    """Apply magic-1 relative offsets and LogAppendTime from the wrapper."""
    base = wrapper.offset - inner[-1].offset
    log_append = bool(wrapper.attributes & _TIMESTAMP_TYPE)
    out: list[Record] = []
    for record in inner:
        out.append(
            Record(
                offset=record.offset + base if base >= 0 else record.offset,
                timestamp=wrapper.timestamp if log_append else record.timestamp,
                key=record.key,
                value=record.value,
                headers=(),
                attributes=record.attributes | (_TIMESTAMP_TYPE if log_append else 0),
            )
        )
    return out

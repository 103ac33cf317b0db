"""Kafka protocol primitive types as pure functions.

Every reader has the shape ``read_x(buf, offset) -> (value, new_offset)`` and
raises :class:`DecodeError` (and only that) on short or malformed input. Every
writer appends to a ``bytearray`` and returns nothing. Buffers may be ``bytes``,
``bytearray`` or ``memoryview``; readers never copy more than the value itself.

Encodings (all integers big-endian, as in Kafka's protocol guide):

* ``int8/16/32/64``, ``uint16``, ``uint32``: fixed width two's complement / unsigned.
* ``float64``: IEEE 754 double.
* ``unsigned varint``: 7 bits per byte, least significant group first, high bit
  set on every byte but the last; at most 5 bytes for 32-bit values.
* ``varint`` / ``varlong``: the zigzag encoding of a signed 32/64-bit value as an
  unsigned varint (at most 5 / 10 bytes), as used inside record batches.
* ``string``: int16 length then UTF-8 bytes; ``nullable string`` uses length -1
  for null. ``compact string``: unsigned varint of length+1 (0 = null).
* ``bytes``: int32 length then raw bytes (-1 = null); ``compact bytes``:
  unsigned varint of length+1 (0 = null).
* ``uuid``: 16 raw bytes.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

Buffer = bytes | bytearray | memoryview


class DecodeError(ValueError):
    """Input bytes do not form a valid value: too short, too long or malformed."""


class EncodeError(ValueError):
    """A value cannot be encoded in the requested version or type."""


_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_F64: Final = struct.Struct(">d")

ZERO_UUID: Final = uuid.UUID(int=0)


def _short(what: str, offset: int) -> DecodeError:
    return DecodeError(f"short input reading {what} at offset {offset}")


def _fixed(s: struct.Struct, what: str, buf: Buffer, offset: int) -> tuple[int, int]:
    end = offset + s.size
    if offset < 0 or end > len(buf):
        raise _short(what, offset)
    return s.unpack_from(buf, offset)[0], end


def read_int8(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_I8, "int8", buf, offset)


def read_int16(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_I16, "int16", buf, offset)


def read_int32(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_I32, "int32", buf, offset)


def read_int64(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_I64, "int64", buf, offset)


def read_uint16(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_U16, "uint16", buf, offset)


def read_uint32(buf: Buffer, offset: int) -> tuple[int, int]:
    return _fixed(_U32, "uint32", buf, offset)


def read_float64(buf: Buffer, offset: int) -> tuple[float, int]:
    end = offset + 8
    if offset < 0 or end > len(buf):
        raise _short("float64", offset)
    value: float = _F64.unpack_from(buf, offset)[0]
    return value, end


def read_bool(buf: Buffer, offset: int) -> tuple[bool, int]:
    if offset < 0 or offset >= len(buf):
        raise _short("bool", offset)
    return buf[offset] != 0, offset + 1


def read_uvarint(buf: Buffer, offset: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned varint of at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit)."""
    result = 0
    shift = 0
    pos = offset
    n = len(buf)
    limit = offset + max_bytes
    while True:
        if pos >= n:
            raise _short("varint", offset)
        if pos >= limit:
            raise DecodeError(f"varint longer than {max_bytes} bytes at offset {offset}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def read_varint(buf: Buffer, offset: int) -> tuple[int, int]:
    """Zigzag-encoded signed 32-bit varint."""
    u, pos = read_uvarint(buf, offset, 5)
    if u > 0xFFFFFFFF:
        raise DecodeError(f"varint out of 32-bit range at offset {offset}")
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: Buffer, offset: int) -> tuple[int, int]:
    """Zigzag-encoded signed 64-bit varint."""
    u, pos = read_uvarint(buf, offset, 10)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError(f"varlong out of 64-bit range at offset {offset}")
    return (u >> 1) ^ -(u & 1), pos


def _take(buf: Buffer, offset: int, length: int, what: str) -> int:
    end = offset + length
    if length < 0 or end > len(buf):
        raise DecodeError(f"{what} of length {length} at offset {offset} overruns the input")
    return end


def _utf8(raw: Buffer, offset: int) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string at offset {offset}") from exc


def read_string(buf: Buffer, offset: int) -> tuple[str, int]:
    length, pos = read_int16(buf, offset)
    if length < 0:
        raise DecodeError(f"null in non-nullable string at offset {offset}")
    end = _take(buf, pos, length, "string")
    return _utf8(buf[pos:end], offset), end


def read_nullable_string(buf: Buffer, offset: int) -> tuple[str | None, int]:
    length, pos = read_int16(buf, offset)
    if length == -1:
        return None, pos
    if length < 0:
        raise DecodeError(f"negative string length {length} at offset {offset}")
    end = _take(buf, pos, length, "string")
    return _utf8(buf[pos:end], offset), end


def read_compact_nullable_string(buf: Buffer, offset: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, offset)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "compact string")
    return _utf8(buf[pos:end], offset), end


def read_compact_string(buf: Buffer, offset: int) -> tuple[str, int]:
    value, pos = read_compact_nullable_string(buf, offset)
    if value is None:
        raise DecodeError(f"null in non-nullable compact string at offset {offset}")
    return value, pos


def read_nullable_bytes(buf: Buffer, offset: int) -> tuple[memoryview | None, int]:
    """int32-length bytes; returns a zero-copy memoryview into ``buf``."""
    length, pos = read_int32(buf, offset)
    if length == -1:
        return None, pos
    end = _take(buf, pos, length, "bytes")
    return memoryview(buf)[pos:end], end


def read_compact_nullable_bytes(buf: Buffer, offset: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, offset)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, "compact bytes")
    return memoryview(buf)[pos:end], end


def read_uuid(buf: Buffer, offset: int) -> tuple[uuid.UUID, int]:
    end = _take(buf, offset, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[offset:end])), end


# -- writers ---------------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    """Zigzag signed 32-bit varint."""
    if -64 <= value < 64:  # one byte: most lengths, deltas and counts in a record
        out.append(~(value << 1) if value < 0 else value << 1)
        return
    if not -(1 << 31) <= value < (1 << 31):
        raise EncodeError(f"varint out of range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Zigzag signed 64-bit varint."""
    if -64 <= value < 64:
        out.append(~(value << 1) if value < 0 else value << 1)
        return
    if not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(f"varlong out of range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_varint(value: int) -> int:
    """Encoded size of a zigzag varint/varlong."""
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while u > 0x7F:
        u >>= 7
        size += 1
    return size


def write_int8(out: bytearray, value: int) -> None:
    out += _I8.pack(value)


def write_int16(out: bytearray, value: int) -> None:
    out += _I16.pack(value)


def write_int32(out: bytearray, value: int) -> None:
    out += _I32.pack(value)


def write_int64(out: bytearray, value: int) -> None:
    out += _I64.pack(value)


def write_uint16(out: bytearray, value: int) -> None:
    out += _U16.pack(value)


def write_uint32(out: bytearray, value: int) -> None:
    out += _U32.pack(value)


def write_float64(out: bytearray, value: float) -> None:
    out += _F64.pack(value)


def write_bool(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise EncodeError(f"string of {len(raw)} bytes exceeds int16 length")
    out += _I16.pack(len(raw))
    out += raw


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    raw = value.encode("utf-8")
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def write_compact_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes

"""Record compression codecs, with decompression bounded against bombs.

A batch's attributes name its codec in bits 0-2; the whole records section of
a v2 batch (or the value of a legacy wrapper message) is one compressed blob:

* ``0`` none.
* ``1`` gzip: one or more RFC 1952 members (zlib/raw deflate are refused).
* ``2`` snappy, in either of two shapes, told apart by the first 8 bytes:

  - xerial framing, written by the Java client and by :func:`compress`::

        offset  size  field
             0     8  magic  82 53 4E 41 50 50 59 00  ("\\x82SNAPPY\\0")
             8     4  version     int32 (1; some writers use little-endian, ignored)
            12     4  compatible  int32 (1; ignored)
            16     -  blocks: int32 length, then that many bytes of raw snappy,
                      each block compressing at most 32 KiB of input

  - plain raw snappy (one block, no framing), which librdkafka writes.
    A raw snappy block opens with the uncompressed length as an unsigned
    varint, which is checked against the budget before anything is allocated.

* ``3`` lz4: the LZ4 frame format (magic ``04 22 4D 18``), independent blocks
  of at most 64 KiB, no content size, as Kafka writes it. Magic-0 messages
  were written by old Kafka with a wrong frame header checksum (KAFKA-3160:
  the xxh32 byte taken over the magic number too);
  ``lz4_fix_header_checksum=True`` recomputes that byte before decoding.
* ``4`` zstd: one or more zstd frames (RFC 8878). Before decompressing, the
  frames are walked header by header so that truncation is an error (the
  streaming reader stops quietly at a cut) and a declared content size over
  the budget is refused without any work.

:func:`decompress` never produces more than ``max_output_bytes + 1`` bytes of
output: gzip, lz4 and zstd run in steps of at most 64 KiB, each asking only for
what the budget still allows, and snappy blocks are sized from their header
before they are inflated; going over raises :class:`DecodeError`. zstd's window is capped
at ``max(max_output_bytes, 8 MiB)`` so a frame cannot demand a huge window.
Every failure of the underlying libraries surfaces as :class:`DecodeError`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Final

import cramjam
import lz4.frame
import zstandard

from odradek.wire.primitives import Buffer, DecodeError, EncodeError, read_uvarint

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
CODEC_NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_STEP: Final = 64 * 1024
_GZIP_WBITS: Final = 31  # gzip container only
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_I32: Final = struct.Struct(">i")
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC: Final = 0xFD2FB528
_ZSTD_MIN_WINDOW_CAP: Final = 8 * 1024 * 1024


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's Java client does for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        deflater = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec == SNAPPY:
        view = memoryview(data)
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        result: bytes = lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            store_size=False,
        )
        return result
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise EncodeError(f"unknown compression codec {codec}")


def decompress(
    codec: int,
    data: Buffer,
    max_output_bytes: int,
    *,
    lz4_fix_header_checksum: bool = False,
) -> bytes:
    """Decompress ``data``; :class:`DecodeError` if it is malformed or inflates too far."""
    if codec == NONE:
        if len(data) > max_output_bytes:
            raise _too_big(max_output_bytes)
        return bytes(data)
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise DecodeError(f"unknown compression codec {codec}")
    if codec == LZ4 and lz4_fix_header_checksum:
        data = _fix_lz4_header_checksum(data)
    try:
        return decoder(data, max_output_bytes)
    except DecodeError:
        raise
    except (zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError) as exc:
        raise DecodeError(f"corrupt {CODEC_NAMES[codec]} data: {exc}") from exc


def _too_big(limit: int) -> DecodeError:
    return DecodeError(f"decompressed data exceeds the limit of {limit} bytes")


def _append(out: bytearray, chunk: bytes, limit: int) -> None:
    out += chunk
    if len(out) > limit:
        raise _too_big(limit)


# -- gzip --------------------------------------------------------------------


def _gunzip(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    inflater = zlib.decompressobj(_GZIP_WBITS)
    pending: Buffer = data
    while True:
        chunk = inflater.decompress(pending, min(_STEP, limit - len(out) + 1))
        _append(out, chunk, limit)
        consumed = len(pending) - len(inflater.unconsumed_tail)
        pending = inflater.unconsumed_tail
        if inflater.eof:
            if not inflater.unused_data:
                return bytes(out)
            pending = inflater.unused_data  # another gzip member follows
            inflater = zlib.decompressobj(_GZIP_WBITS)
        elif not chunk and not consumed:
            raise DecodeError("truncated gzip data")


# -- snappy ------------------------------------------------------------------


def _unsnappy(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if len(view) < 16 or view[:8].tobytes() != _XERIAL_MAGIC:
        return _unsnappy_raw(view, limit)
    out = bytearray()
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise DecodeError("truncated xerial snappy block length")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise DecodeError(f"xerial snappy block of {length} bytes overruns the input")
        _append(out, _unsnappy_raw(view[pos : pos + length], limit - len(out)), limit)
        pos += length
    return bytes(out)


def _unsnappy_raw(block: memoryview, budget: int) -> bytes:
    declared, _ = read_uvarint(block, 0, 5)
    if declared > budget:
        raise DecodeError(f"snappy block declares {declared} bytes, over the remaining budget")
    return bytes(cramjam.snappy.decompress_raw(block))


# -- lz4 ---------------------------------------------------------------------


def _unlz4(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    frames = lz4.frame.LZ4FrameDecompressor()
    pending: Buffer = data
    while True:
        chunk = frames.decompress(pending, max_length=min(_STEP, limit - len(out) + 1))
        _append(out, chunk, limit)
        pending = b""
        if frames.eof:
            if not frames.unused_data:
                return bytes(out)
            pending = frames.unused_data  # another frame follows
            frames = lz4.frame.LZ4FrameDecompressor()
        elif frames.needs_input:
            raise DecodeError("truncated lz4 frame")


def _fix_lz4_header_checksum(data: Buffer) -> bytes:
    """Rewrite the frame header checksum byte with the correct value."""
    raw = bytearray(data)
    if len(raw) < 7 or raw[:4] != _LZ4_MAGIC:
        return bytes(raw)  # let the decoder report it
    descriptor_end = 6 + (8 if raw[4] & 0x08 else 0) + (4 if raw[4] & 0x01 else 0)
    if descriptor_end < len(raw):
        raw[descriptor_end] = (xxh32_small(bytes(raw[4:descriptor_end])) >> 8) & 0xFF
    return bytes(raw)


_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_M32: Final = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_small(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (all an lz4 frame descriptor needs)."""
    if len(data) >= 16:
        raise ValueError("xxh32_small handles inputs under 16 bytes only")
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        lane = int.from_bytes(data[pos : pos + 4], "little")
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


# -- zstd --------------------------------------------------------------------


def _unzstd(data: Buffer, limit: int) -> bytes:
    _check_zstd_frames(memoryview(data), limit)
    window_cap = max(_ZSTD_MIN_WINDOW_CAP, 1 << max(limit - 1, 1).bit_length())
    dctx = zstandard.ZstdDecompressor(max_window_size=window_cap)
    out = bytearray()
    with dctx.stream_reader(data, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(_STEP, limit - len(out) + 1))
            if not chunk:
                return bytes(out)
            _append(out, chunk, limit)


def _check_zstd_frames(view: memoryview, limit: int) -> None:
    """Walk every frame's header and block headers; refuse cuts and oversize frames."""
    if not view:
        raise DecodeError("empty zstd data")
    pos = 0
    declared_total = 0
    while pos < len(view):
        magic = _le(view, pos, 4)
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            pos = _skip(view, pos + 8, _le(view, pos + 4, 4))
            continue
        if magic != _ZSTD_MAGIC:
            raise DecodeError(f"bad zstd frame magic {magic:#010x}")
        descriptor = _le(view, pos + 4, 1)
        pos += 5
        single_segment = bool(descriptor & 0x20)
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
        pos += (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
        if fcs_size:
            size = _le(view, pos, fcs_size) + (256 if fcs_size == 2 else 0)
            declared_total += size
            if declared_total > limit:
                raise _too_big(limit)
            pos += fcs_size
        pos = _walk_zstd_blocks(view, pos)
        if descriptor & 0x04:
            pos = _skip(view, pos, 4)


def _walk_zstd_blocks(view: memoryview, pos: int) -> int:
    while True:
        header = _le(view, pos, 3)
        pos += 3
        block_type = (header >> 1) & 0x03
        if block_type == 3:
            raise DecodeError("reserved zstd block type")
        pos = _skip(view, pos, 1 if block_type == 1 else header >> 3)
        if header & 1:
            return pos


def _le(view: memoryview, pos: int, size: int) -> int:
    if pos + size > len(view):
        raise DecodeError("truncated zstd frame")
    return int.from_bytes(view[pos : pos + size], "little")


def _skip(view: memoryview, pos: int, size: int) -> int:
    if pos + size > len(view):
        raise DecodeError("truncated zstd frame")
    return pos + size


_DECODERS: Final[dict[int, Callable[[Buffer, int], bytes]]] = {
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}

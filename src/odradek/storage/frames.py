"""Walking the batches of a ``.log`` segment file, one frame after the other.

A segment file is RecordBatch v2 batches back to back (:mod:`odradek.storage.segment`);
each batch's 61-byte header (:mod:`odradek.wire.batch`) gives its length, so a
walk reads the header at ``start``, yields it, and jumps ``batchLength + 12``
bytes to the next one, reading the file through a handle in chunks.

:func:`read_headers` checks framing only (a header that fits, a length that is
possible and ends at or before ``stop``): for bytes that recovery already
accepted. :func:`read_valid_batches` also checks each whole batch (magic, CRC),
for bytes not yet trusted. Both raise DecodeError (or its CorruptBatchError) at
the first frame that cannot be a batch, naming the file and the position.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from odradek.storage.fs import FileHandle
from odradek.wire.batch import (
    BATCH_HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptBatchError,
    read_batch_header,
    validate_batch,
)
from odradek.wire.primitives import DecodeError

HEADER_CHUNK: Final = 8192
"""Bytes read at a time when only headers are wanted."""
VALIDATE_CHUNK: Final = 1 << 20
"""Bytes read at a time when whole batches are checked."""


def read_headers(handle: FileHandle, path: str, start: int, stop: int,
                 chunk: int = HEADER_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch of the file ``path`` (open as ``handle``) in
    [start, stop), checking framing only. Raises DecodeError/CorruptBatchError at
    a frame that cannot be a batch."""
    pos = start
    buf = b""
    buf_pos = start
    while pos < stop:
        off = pos - buf_pos
        if off < 0 or off + BATCH_HEADER_SIZE > len(buf):
            buf = handle.pread(pos, min(max(chunk, BATCH_HEADER_SIZE), stop - pos))
            buf_pos, off = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                raise DecodeError(f"{path}: partial batch header at {pos}")
        header = read_batch_header(buf, off)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > stop:
            raise CorruptBatchError(f"{path}: impossible batch length at {pos}")
        yield pos, header
        pos += header.size


def read_valid_batches(handle: FileHandle, path: str, start: int,
                       stop: int) -> Iterator[tuple[int, BatchHeader]]:
    """Like :func:`read_headers` but checks each whole batch (magic, CRC)."""
    pos = start
    buf = b""
    buf_pos = start
    while pos < stop:
        off = pos - buf_pos
        if off < 0 or off + BATCH_HEADER_SIZE > len(buf):
            buf = handle.pread(pos, min(VALIDATE_CHUNK, stop - pos))
            buf_pos, off = pos, 0
        header = read_batch_header(buf, off)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > stop:
            raise CorruptBatchError(f"{path}: impossible batch length at {pos}")
        if off + header.size > len(buf):
            buf = handle.pread(pos, min(max(VALIDATE_CHUNK, header.size), stop - pos))
            buf_pos, off = pos, 0
        validate_batch(buf, off)
        yield pos, header
        pos += header.size

"""RecordBatch v2 (magic 2) header: the part the log and the broker touch.

A batch is never decoded record by record on the hot path. Storage and the
produce path read the fixed 61-byte header, check the CRC, and patch the base
offset (and, for ``LogAppendTime``, the max timestamp) in place.

Byte layout of one batch (big-endian)::

    offset  size  field
         0     8  baseOffset            int64   not covered by the CRC
         8     4  batchLength           int32   bytes after this field (size - 12)
        12     4  partitionLeaderEpoch  int32   not covered by the CRC
        16     1  magic                 int8    always 2 here
        17     4  crc                   uint32  CRC-32C of bytes [21, end)
        21     2  attributes            int16   bits 0-2 compression, 3 timestamp
                                                type (1 = LogAppendTime), 4
                                                transactional, 5 control, 6 has
                                                delete horizon
        23     4  lastOffsetDelta       int32
        27     8  baseTimestamp         int64   (first timestamp)
        35     8  maxTimestamp          int64
        43     8  producerId            int64
        51     2  producerEpoch         int16
        53     4  baseSequence          int32
        57     4  recordsCount          int32
        61     -  records               (compressed as a whole when bits 0-2 != 0)

Record-level encoding and compression live in :mod:`odradek.wire.records`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from odradek.wire.primitives import Buffer, DecodeError, EncodeError

BATCH_HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
CRC_START: Final = 21
MAGIC_OFFSET: Final = 16
MIN_BATCH_LENGTH: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_SEQUENCE: Final = -1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LEN: Final = struct.Struct(">qi")
_I64: Final = struct.Struct(">q")
_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")


class CorruptBatchError(DecodeError):
    """A batch whose framing is plausible but whose CRC or fields are wrong."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def peek_offset_and_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at ``pos``; needs only 12 bytes."""
    if pos < 0 or pos + LOG_OVERHEAD > len(buf):
        raise DecodeError(f"short input reading batch framing at offset {pos}")
    base_offset, length = _OFFSET_LEN.unpack_from(buf, pos)
    return base_offset, length


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``. Checks only that the bytes exist."""
    if pos < 0 or pos + BATCH_HEADER_SIZE > len(buf):
        raise DecodeError(f"short input reading a batch header at offset {pos}")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def encode_batch_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for ``header``, exactly as given (the CRC is not computed)."""
    try:
        return _HEADER.pack(
            header.base_offset, header.batch_length, header.partition_leader_epoch,
            header.magic, header.crc, header.attributes, header.last_offset_delta,
            header.base_timestamp, header.max_timestamp, header.producer_id,
            header.producer_epoch, header.base_sequence, header.records_count,
        )  # fmt: skip
    except struct.error as exc:
        raise EncodeError(f"batch header field out of range: {exc}") from exc


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C over the CRC-covered span of the batch of ``size`` bytes at ``pos``."""
    return int(crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def validate_batch(buf: Buffer, pos: int = 0, max_batch_bytes: int | None = None) -> BatchHeader:
    """Check framing, magic and CRC of the batch at ``pos`` and return its header.

    Raises :class:`DecodeError` when the input is too short to hold the batch its
    length claims, and :class:`CorruptBatchError` for a wrong magic, an impossible
    length, an inconsistent record count or a CRC mismatch.
    """
    _, length = peek_offset_and_length(buf, pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {length} below the minimum {MIN_BATCH_LENGTH}")
    if max_batch_bytes is not None and length + LOG_OVERHEAD > max_batch_bytes:
        raise CorruptBatchError(f"batch of {length + LOG_OVERHEAD} bytes over {max_batch_bytes}")
    if pos + LOG_OVERHEAD + length > len(buf):
        raise DecodeError(f"batch at offset {pos} claims {length} bytes beyond the input")
    header = read_batch_header(buf, pos)
    if header.magic != 2:
        raise CorruptBatchError(f"unsupported magic {header.magic} (only 2 is accepted)")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptBatchError("negative lastOffsetDelta or recordsCount")
    crc = compute_crc(buf, pos, header.size)
    if crc != header.crc:
        raise CorruptBatchError(f"CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}")
    return header


def iter_batches(buf: Buffer) -> list[tuple[int, BatchHeader]]:
    """Validate every batch in a records field; return (position, header) pairs.

    The whole buffer must consist of complete batches.
    """
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos)
        out.append((pos, header))
        pos += header.size
    return out


def set_base_offset(batch: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Write baseOffset in place. The CRC does not cover it."""
    _I64.pack_into(batch, pos, base_offset)


def set_log_append_time(batch: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the batch as LogAppendTime with ``now_ms`` as max timestamp; fix the CRC."""
    attributes = _I16.unpack_from(batch, pos + 21)[0] | ATTR_TIMESTAMP_TYPE
    _I16.pack_into(batch, pos + 21, attributes)
    _I64.pack_into(batch, pos + 35, now_ms)
    _U32.pack_into(batch, pos + 17, compute_crc(batch, pos, size))

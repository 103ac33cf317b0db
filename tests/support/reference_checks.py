"""The checks the batch scan (odradek.storage.batch_scan) replaced, kept as its oracle.

Before the scan, a client's records field was judged by ``check_client_batches``
and, on compacted topics, the partition layer's ``_keyless``; a replicated field
by ``check_batch`` batch by batch; a follower cut a large fetch with
``_segment_sized``. ``tests/unit/storage/test_batch_scan.py`` holds the scan to
these verdicts on generated and damaged fields. Not used by the broker.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from odradek.wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    read_batch_header,
    validate_batch,
)
from odradek.wire.primitives import DecodeError
from odradek.wire.records import decode_batches

_MIN_RECORD_BYTES: Final = 7
_FAR: Final = 2**62


class Checked(NamedTuple):
    """A validated records field: per batch (position, size, records, max timestamp)."""

    batches: list[tuple[int, int, int, int]]
    records: int
    max_timestamp: int


def check_batch(view: memoryview, pos: int) -> BatchHeader:
    """Framing, magic and CRC of the batch at ``pos``, for replicated appends. Not
    ``max.message.bytes``: the leader accepted the batch, and a follower whose
    limit is lower (a dynamic broker config, a topic's lowered limit while it
    lagged) must still copy it, as Kafka's followers do."""
    try:
        return validate_batch(view, pos)
    except DecodeError as e:
        raise CorruptRecordError(str(e)) from e


# The header fields this module reads, at the offsets documented in
# odradek.wire.batch. Unpacking them into a tuple costs a fraction of building a
# BatchHeader, and this runs once per produced batch.
_FIELDS: Final = struct.Struct(">qiibIhiqqqhii")


def check_client_batches(
    view: memoryview, config: LogConfig, now_ms: int, *, allow_control: bool = False
) -> Checked:
    """Every check of the module docstring, for a produce request's records field.
    ``allow_control``: a coordinator's batches are let through: transaction
    markers (control batches) and transactional batches with a producer id and
    no sequence (offsets committed in a transaction)."""
    batches: list[tuple[int, int, int, int]] = []
    records = 0
    max_ts = -1
    pos = 0
    end = len(view)
    limit = config.max_message_bytes
    create_time = not config.log_append_time
    newest = now_ms + min(config.message_timestamp_after_max_ms, _FAR)
    oldest = now_ms - min(config.message_timestamp_before_max_ms, _FAR)
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"{end - pos} bytes at {pos} cannot hold a batch header")
        (_, length, _, magic, crc, attributes, delta, first_ts, batch_ts, producer_id, _,
         sequence, count) = _FIELDS.unpack_from(view, pos)  # fmt: skip
        size = length + LOG_OVERHEAD
        if size > limit and pos + size <= end:
            raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {limit}")
        if length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise CorruptRecordError(f"batch at {pos} claims {size} bytes, {end - pos} present")
        if magic != 2:
            raise CorruptRecordError(f"unsupported magic {magic}")
        if compute_crc(view, pos, size) != crc:
            raise CorruptRecordError(f"CRC mismatch in the batch at {pos}")
        if count <= 0 or delta != count - 1:
            raise InvalidRecordError(
                f"inconsistent batch: lastOffsetDelta {delta}, recordsCount {count}"
            )
        if (
            not attributes & ATTR_COMPRESSION_MASK
            and count * _MIN_RECORD_BYTES > size - BATCH_HEADER_SIZE
        ):
            raise InvalidRecordError(f"{count} records cannot fit in {size} bytes")
        if attributes & ATTR_CONTROL:
            if not allow_control:
                raise InvalidRecordError("clients may not write control batches")
        elif producer_id >= 0 and sequence < 0 and not allow_control:
            raise InvalidRecordError(f"producer id {producer_id} with base sequence {sequence}")
        if create_time:
            if batch_ts > newest:
                raise InvalidTimestampError(
                    f"timestamp {batch_ts} is more than "
                    f"{config.message_timestamp_after_max_ms} ms after {now_ms}"
                )
            if 0 <= first_ts < oldest:
                raise InvalidTimestampError(
                    f"timestamp {first_ts} is more than "
                    f"{config.message_timestamp_before_max_ms} ms before {now_ms}"
                )
        batches.append((pos, size, count, batch_ts))
        records += count
        if batch_ts > max_ts:
            max_ts = batch_ts
        pos += size
    return Checked(batches, records, max_ts)


def keyless(records: memoryview) -> str | None:
    """Kafka's refusal of a record without a key on a compacted topic (the records
    are decoded, as Kafka's LogValidator does for compacted topics)."""
    try:
        batches = decode_batches(records)
    except DecodeError as exc:
        return f"records do not decode: {exc}"
    for _, batch in batches:
        for r in batch:
            if r.key is None:
                return "Compacted topic cannot accept message without key"
    return None


def segment_sized(records: memoryview, limit: int) -> Iterable[memoryview]:
    """How a follower cut a fetch larger than ``segment.bytes`` into parts."""
    if len(records) <= limit:
        yield records
        return
    begin = pos = 0
    while pos < len(records):
        try:
            size = read_batch_header(records, pos).size
        except DecodeError:
            break  # the log's own checks report it
        if pos > begin and pos + size - begin > limit:
            yield records[begin:pos]
            begin = pos
        pos += size
    yield records[begin:]

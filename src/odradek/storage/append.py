"""Checking produced batches and preparing their bytes for the log.

Only the 61-byte batch header and the CRC are looked at; records are never
decoded (DESIGN decision 3). The checks, in Kafka's terms:

* framing, magic 2 and CRC-32C (``CORRUPT_MESSAGE``);
* a batch larger than ``max.message.bytes`` (``MESSAGE_TOO_LARGE``);
* from clients only (Kafka's ``LogValidator``): ``recordsCount >= 1`` and
  ``lastOffsetDelta == recordsCount - 1``; no control batches; a producer id
  needs a base sequence (``INVALID_RECORD``). An uncompressed batch must also
  have room for ``recordsCount`` records (7 bytes each at least), which bounds
  the offsets a client can claim without decoding;
* CreateTime bounds ``message.timestamp.{before,after}.max.ms``
  (``INVALID_TIMESTAMP``): "after" is exact (the batch max timestamp bounds
  every record), "before" checks the batch's first timestamp only.

The bytes written are the request's own: each batch becomes two write chunks,
a patched copy of its first 16 bytes (``baseOffset``, ``batchLength``,
``partitionLeaderEpoch``; none covered by the CRC) and a view of the rest, so
a ``pwritev`` appends them without copying the payload. LogAppendTime batches
need a new CRC, so they are copied whole and patched.

:func:`append_as_leader` and :func:`append_replicated` are the two appends of a
log (:class:`~odradek.storage.log.Log` calls them): assign offsets or check
the ones given, write through the :class:`~odradek.storage.local_log.LocalLog`,
note new leader epochs, and describe what was done as an :class:`AppendInfo`.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from odradek.storage.config import LogConfig
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from odradek.storage.local_log import LocalLog
from odradek.storage.segment import BatchMeta
from odradek.storage.writes import AppendJob
from odradek.wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from odradek.wire.primitives import Buffer, DecodeError

_EPOCH: Final = struct.Struct(">i")
_PREFIX: Final = 16  # baseOffset, batchLength, partitionLeaderEpoch: outside the CRC
_MIN_RECORD_BYTES: Final = 7  # length, attributes, ts delta, offset delta, key, value, headers
_FAR: Final = 2**62


class AppendInfo(NamedTuple):
    """What an append did (a NamedTuple: the append path builds one per request)."""

    first_offset: int
    """Offset of the first record appended; -1 when ``records`` held no batch."""
    last_offset: int
    log_append_time_ms: int
    """The broker time written into the batches for LogAppendTime topics, else -1."""
    max_timestamp: int
    records: int
    batches: int
    size_bytes: int
    log_start_offset: int
    flush_due: bool
    """A flush is due now (``flush.messages`` reached, or a segment was rolled), counting
    only what a flush in flight does not cover. With ``flush.messages`` set, Kafka
    acknowledges such an append only after the flush."""
    write: AppendJob | None = None
    """The pending write of these bytes (a write sink is set); None once written."""


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


def patch_create_time(
    view: memoryview, checked: Checked, first_offset: int, leader_epoch: int
) -> tuple[list[Buffer], list[tuple[int, int, int]]]:
    """Write chunks (patched prefix + untouched rest, per batch) and per-batch
    (last offset, max timestamp, size)."""
    chunks: list[Buffer] = []
    metas: list[tuple[int, int, int]] = []
    offset = first_offset
    for pos, size, count, batch_ts in checked.batches:
        head = bytearray(view[pos : pos + _PREFIX])
        set_base_offset(head, 0, offset)
        if leader_epoch >= 0:
            _EPOCH.pack_into(head, 12, leader_epoch)
        chunks.append(head)
        chunks.append(view[pos + _PREFIX : pos + size])
        offset += count
        metas.append((offset - 1, batch_ts, size))
    return chunks, metas


def patch_log_append_time(
    view: memoryview, checked: Checked, first_offset: int, leader_epoch: int, now_ms: int
) -> tuple[list[Buffer], list[tuple[int, int, int]]]:
    """One patched copy of all batches, each stamped with ``now_ms`` (new CRC)."""
    copy = bytearray(view)
    metas: list[tuple[int, int, int]] = []
    offset = first_offset
    for pos, size, count, _ in checked.batches:
        set_base_offset(copy, pos, offset)
        if leader_epoch >= 0:
            _EPOCH.pack_into(copy, pos + 12, leader_epoch)
        set_log_append_time(copy, pos, size, now_ms)
        offset += count
        metas.append((offset - 1, now_ms, size))
    return [copy], metas


def empty_append(log_start: int) -> AppendInfo:
    return AppendInfo(-1, -1, -1, -1, 0, 0, 0, log_start, False)


def append_as_leader(local: LocalLog, epochs: LeaderEpochCache, view: memoryview,
                     checked: Checked, leader_epoch: int, now_ms: int,
                     log_start: int) -> AppendInfo:
    """Append ``view`` (``checked``, non-empty) as the leader: offsets from the next
    offset, ``leader_epoch`` (>= 0) written into each batch's
    partitionLeaderEpoch, and for LogAppendTime topics the broker's time as each
    batch's max timestamp."""
    first = local.next_offset
    if local.config.log_append_time:
        chunks, metas = patch_log_append_time(view, checked, first, leader_epoch, now_ms)
        append_time = max_ts = now_ms
    else:
        chunks, metas = patch_create_time(view, checked, first, leader_epoch)
        append_time, max_ts = -1, checked.max_timestamp
    job = local.write(chunks, metas, len(view), max_ts, now_ms, checked.records)
    if leader_epoch > epochs.latest_epoch:
        assign_epoch(local, epochs, leader_epoch, first)
    return AppendInfo(first, local.next_offset - 1, append_time, max_ts, checked.records,
                      len(metas), len(view), log_start, local.append_waits_for_flush(), job)


def append_replicated(local: LocalLog, epochs: LeaderEpochCache, view: memoryview,
                      now_ms: int, log_start: int) -> AppendInfo:
    """Append batches that already carry their offsets (a follower, or a Raft log).
    Offsets must increase from the next offset on (each batch at or above the end
    of the one before); gaps are allowed, as a compacted leader leaves them. Only
    framing and CRC are checked (not ``max.message.bytes``: the leader took the
    batch); timestamps and each batch's partitionLeaderEpoch are kept (and noted
    in the epoch cache)."""
    if len(view) > local.config.segment_bytes:
        raise RecordListTooLargeError(f"{len(view)} bytes exceed segment.bytes")
    metas: list[BatchMeta] = []
    expected = local.next_offset
    max_ts = -1
    records_count = 0
    new_epochs: list[tuple[int, int]] = []
    first = -1
    pos = 0
    while pos < len(view):
        h = check_batch(view, pos)
        if h.base_offset < expected:
            raise CorruptRecordError(
                f"replicated batch at offset {h.base_offset}, expected {expected} or later")
        if first < 0:
            first = h.base_offset
        new_epochs.append((h.partition_leader_epoch, h.base_offset))
        metas.append((h.last_offset, h.max_timestamp, h.size))
        max_ts = max(max_ts, h.max_timestamp)
        records_count += h.records_count
        expected = h.next_offset
        pos += h.size
    job = local.write([view], metas, len(view), max_ts, now_ms, records_count)
    for epoch, base in new_epochs:
        if epoch > epochs.latest_epoch:
            assign_epoch(local, epochs, epoch, base)
    return AppendInfo(first, local.next_offset - 1, -1, max_ts, records_count, len(metas),
                      len(view), log_start, local.append_waits_for_flush(), job)


def assign_epoch(local: LocalLog, epochs: LeaderEpochCache, epoch: int, start: int) -> None:
    """Note ``epoch`` starting at ``start`` in the cache (an IO error takes the log
    offline)."""
    try:
        epochs.assign(epoch, start)
    except OSError as e:
        raise local.io_failed("leader-epoch-checkpoint write", e) from e

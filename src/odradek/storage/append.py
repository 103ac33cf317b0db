"""Appending scanned batches to a log: offsets, leader epochs, the bytes to write.

Every batch header was read once, by :mod:`odradek.storage.batch_scan`, whose
table (:class:`~odradek.storage.batch_scan.BatchTable`) is all this module
reads of them; records are never decoded (DESIGN decision 3).

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
from collections.abc import Sequence
from typing import Final, NamedTuple

from odradek.storage.batch_scan import BatchRow, BatchTable
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.errors import CorruptRecordError, RecordListTooLargeError
from odradek.storage.local_log import LocalLog
from odradek.storage.segment import BatchMeta
from odradek.storage.writes import AppendJob
from odradek.wire.batch import (
    set_base_offset,
    set_log_append_time,
)
from odradek.wire.primitives import Buffer

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


def patch_create_time(
    view: memoryview, checked: BatchTable, first_offset: int, leader_epoch: int
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
    view: memoryview, checked: BatchTable, first_offset: int, leader_epoch: int, now_ms: int
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
                     checked: BatchTable, leader_epoch: int, now_ms: int,
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
    # (unwritten: the epoch was noted when this leader was elected; written now)
    if leader_epoch > epochs.latest_epoch or epochs.unwritten:
        assign_epoch(local, epochs, leader_epoch, first)
    return AppendInfo(first, local.next_offset - 1, append_time, max_ts, checked.records,
                      len(metas), len(view), log_start, local.append_waits_for_flush(), job)


def append_replicated(local: LocalLog, epochs: LeaderEpochCache, view: memoryview,
                      rows: Sequence[BatchRow], now_ms: int, log_start: int) -> AppendInfo:
    """Append batches that already carry their offsets (a follower, or a Raft log):
    ``rows`` are ``view``'s batches as :func:`~odradek.storage.batch_scan.scan_replica`
    read them (framing and CRC; not ``max.message.bytes``: the leader took the
    batch). Offsets must increase from the next offset on (each batch at or
    above the end of the one before); gaps are allowed, as a compacted leader
    leaves them. Timestamps and each batch's partitionLeaderEpoch are kept (and
    noted in the epoch cache)."""
    if len(view) > local.config.segment_bytes:
        raise RecordListTooLargeError(f"{len(view)} bytes exceed segment.bytes")
    expected = local.next_offset
    max_ts = -1
    records_count = 0
    for row in rows:
        if row.base_offset < expected:
            raise CorruptRecordError(
                f"replicated batch at offset {row.base_offset}, expected {expected} or later")
        if row.max_timestamp > max_ts:
            max_ts = row.max_timestamp
        records_count += row.records_count
        expected = row.next_offset
    metas: list[BatchMeta] = [(r.last_offset, r.max_timestamp, r.size) for r in rows]
    job = local.write([view], metas, len(view), max_ts, now_ms, records_count)
    for row in rows:
        if row.partition_leader_epoch > epochs.latest_epoch:
            assign_epoch(local, epochs, row.partition_leader_epoch, row.base_offset)
    return AppendInfo(rows[0].base_offset, local.next_offset - 1, -1, max_ts, records_count,
                      len(metas), len(view), log_start, local.append_waits_for_flush(), job)


def assign_epoch(local: LocalLog, epochs: LeaderEpochCache, epoch: int, start: int) -> None:
    """Note ``epoch`` starting at ``start`` in the cache (an IO error takes the log
    offline)."""
    try:
        epochs.assign(epoch, start)
    except OSError as e:
        raise local.io_failed("leader-epoch-checkpoint write", e) from e

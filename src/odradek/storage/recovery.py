"""Bringing a segment back after a stop: trust what was flushed, check the rest.

After a clean shutdown (:func:`open_active_clean`) the active segment's indexes
are loaded and only the bytes after the last offset-index entry are scanned (at
most ``index.interval.bytes`` plus one batch) to find the log end offset.

After an unclean stop (:func:`recover_segment`) every byte from the recovery
point on is suspect. Everything below the recovery point was fsynced, and so
were the index entries describing it, because a flush writes the indexes before
it syncs. So recovery keeps the offset-index entries below the recovery point,
checks the last of them against the batch it names, and validates (framing,
magic, CRC, contiguous offsets) from that batch to the end of the file. The
first batch that fails ends the segment: the file is cut there. Index entries
for the validated tail are rebuilt exactly as the appends would have made them.
When no trusted entry exists (index missing, damaged, or the recovery point in
the segment's first ``index.interval.bytes``) the whole segment is validated.
The cost is proportional to the unflushed tail, not to the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.config import INT_MAX
from odradek.storage.errors import CorruptIndexError
from odradek.storage.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from odradek.storage.segment import Segment
from odradek.wire.batch import BATCH_HEADER_SIZE, BatchHeader
from odradek.wire.primitives import DecodeError


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    truncated_bytes: int
    validated_bytes: int


@dataclass(slots=True)
class _Resume:
    oi: OffsetIndex
    ti: TimeIndex
    position: int
    header: BatchHeader
    max_ts: tuple[int, int]


def _load(seg: Segment) -> tuple[OffsetIndex, TimeIndex] | None:
    oi = OffsetIndex(seg.base_offset, seg.max_index_bytes)
    ti = TimeIndex(seg.base_offset, seg.max_index_bytes)
    try:
        oi.load(seg.fs.read_file(seg.index_path), seg.size)
        ti.load(seg.fs.read_file(seg.time_index_path))
    except (FileNotFoundError, CorruptIndexError):
        return None
    return oi, ti


def _header_at(seg: Segment, position: int) -> BatchHeader | None:
    try:
        for _, h in seg.iter_headers(position, chunk=BATCH_HEADER_SIZE):
            return h
    except DecodeError:
        return None
    return None


def _batch_ending_at(seg: Segment, oi: OffsetIndex, offset: int) -> BatchHeader | None:
    """The header of the batch whose last offset is ``offset``, found through ``oi``."""
    entry = oi.lookup(offset)
    start = 0 if entry is None else entry[1]
    try:
        for _, h in seg.iter_headers(start):
            if h.last_offset >= offset:
                return h if h.last_offset == offset else None
    except DecodeError:
        return None
    return None


def _time_entry_holds(seg: Segment, oi: OffsetIndex, entry: tuple[int, int] | None) -> bool:
    if entry is None:
        return True
    h = _batch_ending_at(seg, oi, entry[1])
    return h is not None and h.max_timestamp == entry[0]


def _resume_point(seg: Segment, recovery_point: int) -> _Resume | None:
    loaded = _load(seg)
    if loaded is None:
        return None
    oi, ti = loaded
    entry = oi.lookup(recovery_point - 1)
    if entry is None:
        return None
    offset, position = entry
    header = _header_at(seg, position)
    if header is None or header.last_offset != offset:
        return None
    oi.truncate_to_offset(offset + 1)
    ti.truncate_to_offset(offset + 1)
    last_ts = ti.last()
    if not _time_entry_holds(seg, oi, last_ts):
        return None
    max_ts = (last_ts[0], last_ts[1]) if last_ts is not None else (NO_TIMESTAMP, seg.base_offset)
    return _Resume(oi, ti, position, header, max_ts)


def recover_segment(seg: Segment, recovery_point: int | None) -> RecoveryResult:
    """Validate ``seg`` from ``recovery_point`` (None: from its start), cut it after the
    last valid batch, rebuild its indexes past the trusted prefix and write them."""
    resume = None
    if recovery_point is not None and recovery_point > seg.base_offset:
        resume = _resume_point(seg, recovery_point)
    if resume is None:
        oi = OffsetIndex(seg.base_offset, seg.max_index_bytes)
        ti = TimeIndex(seg.base_offset, seg.max_index_bytes)
        oi.state.reset_file()
        ti.state.reset_file()
        start, expected = 0, seg.base_offset
        max_ts, max_off = NO_TIMESTAMP, seg.base_offset
    else:
        oi, ti = resume.oi, resume.ti
        start, expected = resume.position, resume.header.base_offset
        max_ts, max_off = resume.max_ts
    skip_index = resume is not None  # the resume batch already has its index entry
    since = 0
    valid_end = start
    try:
        for pos, h in seg.iter_valid_batches(start):
            if h.base_offset != expected or h.last_offset - seg.base_offset > INT_MAX:
                break
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if skip_index:
                skip_index = False
            elif since > seg.index_interval_bytes:
                if oi.append(h.last_offset, pos):
                    ti.maybe_append(max_ts, max_off)
                since = 0
            since += h.size
            valid_end = pos + h.size
            expected = h.next_offset
    except DecodeError:
        pass
    truncated = seg.size - valid_end
    if truncated:
        seg.log_handle().truncate(valid_end)
        seg.dirty = True
        seg.size = valid_end
    if resume is not None and valid_end == start:
        # Damage at or below the recovery point: nothing to trust, start over.
        seg.rebuild_indexes()
        return RecoveryResult(truncated, valid_end)
    # As Kafka does, end the time index with the segment's newest timestamp, so the
    # segment's maximum is known from the file alone once it is below the recovery point.
    ti.maybe_append(max_ts, max_off, force=True)
    seg.install_indexes(
        oi, ti, bytes_since_index=since, max_ts=(max_ts, max_off), next_offset=expected
    )
    seg.write_indexes()
    return RecoveryResult(truncated, valid_end - start)


def open_active_clean(seg: Segment) -> bool:
    """Load the active segment after a clean shutdown; False if its files disagree
    (then the caller runs :func:`recover_segment` instead)."""
    loaded = _load(seg)
    if loaded is None:
        return False
    oi, ti = loaded
    last = oi.last()
    start = 0 if last is None else last[1]
    last_ts = ti.last()
    if not _time_entry_holds(seg, oi, last_ts):
        return False
    max_ts, max_off = last_ts if last_ts is not None else (NO_TIMESTAMP, seg.base_offset)
    next_offset = seg.base_offset
    try:
        for pos, h in seg.iter_headers(start):
            if pos == start and last is not None and h.last_offset != last[0]:
                return False
            if pos == 0 and h.base_offset != seg.base_offset:
                return False
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            next_offset = h.next_offset
    except DecodeError:
        return False
    seg.install_indexes(
        oi,
        ti,
        bytes_since_index=seg.size - start,
        max_ts=(max_ts, max_off),
        next_offset=next_offset,
    )
    return True

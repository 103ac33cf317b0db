"""Bringing a segment back after a stop: trust what was flushed, check the rest.

After a clean shutdown (:func:`open_active_clean`) the active segment's indexes
are loaded and only the bytes after the last offset-index entry are scanned (at
most ``index.interval.bytes`` plus one batch) to find the log end offset.

After an unclean stop (:func:`recover_segment`) every byte from the recovery
point on is suspect. Everything below the recovery point was fsynced, and so
were the index entries describing it, because a flush writes the indexes before
it syncs. So recovery keeps the offset-index entries below the recovery point,
checks the last of them against the batch it names, and validates (framing,
magic, CRC, increasing offsets) from that batch to the end of the file. Offsets
need not be contiguous: compaction and skipped damage leave gaps, and a batch
above the one before it is kept, as Kafka keeps it. The first
batch that fails ends the segment (the file is cut there) unless damage is
skipped (:mod:`odradek.storage.damage`): then, if a valid batch follows, the
damaged bytes are cut out and validation goes on from it. Index entries
for the validated tail are rebuilt exactly as the appends would have made them.
When no trusted entry exists (index missing, damaged, or the recovery point in
the segment's first ``index.interval.bytes``) the whole segment is validated.
The cost is proportional to the unflushed tail, not to the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.config import INT_MAX
from odradek.storage.damage import Damage, cut_out, find_next_batch
from odradek.storage.errors import CorruptIndexError
from odradek.storage.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from odradek.storage.segment import Segment
from odradek.wire.batch import BATCH_HEADER_SIZE, BatchHeader
from odradek.wire.primitives import DecodeError


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    truncated_bytes: int
    validated_bytes: int
    validated_batches: int = 0
    damage: tuple[Damage, ...] = ()


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


def recover_segment(
    seg: Segment, recovery_point: int | None, *, skip_damage: bool = False,
    next_base: int | None = None,
) -> RecoveryResult:
    """Validate ``seg`` from ``recovery_point`` (None: from its start), cut it after the
    last valid batch, rebuild its indexes past the trusted prefix and write them.

    ``next_base`` is the base offset of the next segment (None for the last one).
    With ``skip_damage``, damaged bytes followed by a valid batch are cut out of
    the file instead (see the module doc); so are damaged bytes at the end of a
    segment that is not the last one, since they cannot be a torn write. As a
    batch's base offset is outside its CRC, a batch whose offset jumps forward
    and is followed by one that goes back, or that ends the log with a jump, or
    that runs into the next segment, is taken as damaged too. Offsets must
    increase; forward gaps are kept (compaction leaves them), in both modes."""
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
    batches = 0
    damaged: list[tuple[int, int]] = []
    found: list[Damage] = []
    jump: tuple[int, int, int] | None = None
    """(position, end, expected offset before it) of the last batch whose offset jumped."""
    path = seg.log_path
    while True:
        reason = ""
        try:
            for pos, h in seg.iter_valid_batches(valid_end):
                if h.last_offset - seg.base_offset > INT_MAX:
                    reason = f"offset {h.last_offset} beyond the segment's range"
                    break
                if h.base_offset > expected:
                    jump = (pos, pos + h.size, expected)  # a gap: compaction leaves them
                elif h.base_offset < expected:
                    if not skip_damage:
                        reason = f"offset {h.base_offset} where {expected} or later was expected"
                        break
                    if jump is not None and jump[1] == pos and h.base_offset >= jump[2]:
                        # The previous batch's base offset was damaged: cut it out.
                        damaged.append((jump[0], jump[1]))
                        found.append(Damage(path, jump[0], jump[1] - jump[0], jump[2],
                                            h.base_offset, "skipped", "base offset out of order"))
                        jump = None
                    else:
                        reason = f"offset {h.base_offset} where {expected} or later was expected"
                        break
                else:
                    jump = None
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
                batches += 1
        except DecodeError as exc:
            reason = str(exc).removeprefix(f"{path}: ")
        if not reason or not skip_damage:
            break
        nxt = find_next_batch(seg.fs, seg.handles, path, valid_end + 1, seg.size, expected)
        if nxt is None and next_base is None:
            break  # a torn tail: cut it as after any crash
        end = seg.size if nxt is None else nxt
        damaged.append((valid_end, end))
        after = _header_at(seg, nxt) if nxt is not None else None
        next_offset = after.base_offset if after is not None else next_base
        found.append(Damage(path, valid_end, end - valid_end, expected, next_offset,
                            "skipped", reason))
        jump = None
        if nxt is None or next_offset is None:
            break
        valid_end, expected = nxt, next_offset  # the damage explains the gap
    if (skip_damage and jump is not None and jump[1] == valid_end
            and next_base is not None and expected > next_base):
        # The last batch jumped forward into the next segment's offsets.
        damaged.append((jump[0], jump[1]))
        found.append(Damage(path, jump[0], jump[1] - jump[0], jump[2], next_base,
                            "skipped", "base offset out of order"))
    if damaged:
        truncated = 0
        if damaged[-1][1] < seg.size and valid_end < seg.size:
            # A torn tail after the last skipped range: cut it as after any crash.
            truncated = seg.size - valid_end
            seg.log_handle().truncate(valid_end)
            seg.size = valid_end
        return _cut_damage(seg, damaged, found, batches, truncated)
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
    return RecoveryResult(truncated, valid_end - start, batches)


def _cut_damage(
    seg: Segment, damaged: list[tuple[int, int]], found: list[Damage], batches: int,
    truncated: int,
) -> RecoveryResult:
    """Cut the damaged ranges out of ``seg``, then rebuild its indexes from what is left."""
    new_size, saved = cut_out(seg.fs, seg.handles, seg.log_path, seg.size, damaged)
    seg.size = new_size
    seg.dirty = True
    seg.rebuild_indexes()
    out = tuple(
        Damage(d.path, d.position, d.length, d.first_offset, d.next_offset, d.action, d.reason,
               saved_as=path)
        for d, path in zip(found, saved, strict=True)
    )
    return RecoveryResult(truncated, new_size, batches, out)


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
            if pos == 0 and h.base_offset < seg.base_offset:
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

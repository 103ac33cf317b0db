"""One cleaner pass over files: steps 2 and 3 of :mod:`odradek.storage.cleaner`.

:func:`run_pass` builds the offset map from the dirty segments
(:func:`build_offset_map`), cuts the segments from the log start to the map's
end into groups (:func:`group_segments`) and writes each group, cleaned, to
``<base>.log.cleaned`` (:func:`clean_group`), fsynced. It swaps nothing in: the
caller does that on the event loop. It reads and writes only through the
:class:`~odradek.storage.fs.FileSystem` it is given and takes only picklable
arguments, so it runs in a worker process (:mod:`odradek.storage.cleaner_worker`)
as well as in-process.

``<base>.log.cleaned`` is a segment file like any other (format in
:mod:`odradek.storage.segment`): the batches kept from the group, in order,
each with its original base offset, so offsets only gain gaps. Its last batch
is the group's last (kept empty if need be), so the file ends where the group
ends. A ``.cleaned`` file that already exists is never overwritten: only a pass
left over from before a restart can be writing it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from odradek.storage.cleaner_io import (
    SegmentFile,
    Throttle,
    check_parent,
    segment_batches,
)
from odradek.storage.cleaner_policy import CleanerView
from odradek.storage.fs import FileSystem
from odradek.storage.names import CLEANED_SUFFIX, LOG_SUFFIX, segment_path
from odradek.wire.batch import ATTR_DELETE_HORIZON, BatchHeader
from odradek.wire.records import (
    Record,
    RecordSpan,
    batch_keys,
    build_batch,
    decode_batch,
    empty_batch,
    keep_records,
    scan_batch,
)

WRITE_BUFFER_BYTES = 512 * 1024
"""Cleaned bytes gathered before a write (Kafka's ``log.cleaner.io.buffer.size``)."""

IsAborted = Callable[[int, int], bool]
"""(producer id, offset) -> is the batch at that offset part of an aborted transaction?"""


def key_digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    """Key digest -> latest offset, holding at most ``max_entries`` keys."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(max_entries, 1)
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` for ``key``; False (nothing changed) when a new key does
        not fit."""
        digest = key_digest(key)
        if digest not in self._offsets and len(self._offsets) >= self.max_entries:
            return False
        self._offsets[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        return self._offsets.get(key_digest(key), -1)


@dataclass(slots=True)
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_rewritten: int = 0
    tombstones_dropped: int = 0
    markers_dropped: int = 0


@dataclass(slots=True)
class Group:
    """Inactive segments rewritten into one (named by the first one's base)."""

    segments: list[SegmentFile]
    first_index: int = 0
    """Position of the first of them among the pass's segments."""
    cleaned_path: str = ""
    size: int = 0


@dataclass(slots=True)
class CleanPlan:
    """What one pass will do; :func:`build_offset_map` fills the map."""

    first_dirty: int
    first_uncleanable: int
    offset_map: OffsetMap
    map_end: int = -1
    groups: list[Group] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)
    throttle: Throttle = field(default_factory=lambda: Throttle(float("inf")))
    txn_data_kept: dict[int, bool] = field(default_factory=dict)
    """Producer id -> whether data of its current transaction survives this pass
    (carried across groups, as Kafka does since KAFKA-8351)."""


def build_offset_map(
    fs: FileSystem, plan: CleanPlan, segments: Sequence[SegmentFile], is_aborted: IsAborted
) -> None:
    """Fill the plan's map from the dirty segments, oldest first. When a new key
    does not fit, the map ends at that record: the pass cleans below it and the
    next pass goes on from there."""
    offset_map = plan.offset_map
    end = plan.first_dirty
    for i, seg in enumerate(segments):
        seg_end = segments[i + 1].base_offset if i + 1 < len(segments) else seg.next_offset
        if seg_end <= plan.first_dirty:
            continue
        check_parent()
        for h, data in segment_batches(fs, seg):
            plan.throttle.spend(len(data))
            if h.last_offset < plan.first_dirty or h.is_control:
                continue
            if h.is_transactional and is_aborted(h.producer_id, h.base_offset):
                continue
            _, keys = batch_keys(data)
            for offset, key, _ in keys:
                if offset < plan.first_dirty or key is None:
                    continue
                if not offset_map.put(key, offset):
                    plan.map_end = offset
                    return
        end = seg_end
    plan.map_end = end


def group_segments(segments: Sequence[SegmentFile], map_end: int, segment_bytes: int,
                   ) -> list[Group]:
    """The segments from the log start up to the map's end, in groups whose total
    size stays within ``segment.bytes`` (and offsets within an int32 of the base)."""
    groups: list[Group] = []
    for i, seg in enumerate(segments):
        if seg.base_offset >= map_end:
            break
        last = groups[-1] if groups else None
        if (last is not None and last.size + seg.size <= segment_bytes
                and seg.next_offset - last.segments[0].base_offset < 2**31):
            last.segments.append(seg)
            last.size += seg.size
        else:
            groups.append(Group([seg], first_index=i, size=seg.size))
    return groups


def clean_group(
    fs: FileSystem, group: Group, plan: CleanPlan, now_ms: int, delete_retention_ms: int,
    is_aborted: IsAborted,
) -> None:
    """Write the cleaned group to ``<base>.log.cleaned`` (fsynced)."""
    base = group.segments[0].base_offset
    group.cleaned_path = segment_path(group.segments[0].dir_path, base, LOG_SUFFIX) + (
        CLEANED_SUFFIX)
    last_of_producer: dict[int, int] = {}  # producer id -> base offset of its last batch
    group_last = -1  # base offset of the group's last batch
    for seg in group.segments:
        for h, _ in segment_batches(fs, seg, headers_only=True):
            group_last = h.base_offset
            if h.producer_id >= 0:
                last_of_producer[h.producer_id] = h.base_offset
    check_parent()
    if fs.exists(group.cleaned_path):
        # Only a cleaner left over from before a restart can be writing it.
        raise FileExistsError(f"{group.cleaned_path} exists: another pass is writing it")
    handle = fs.open(group.cleaned_path, create=True)
    try:
        handle.truncate(0)
        position = 0
        pending: list[bytes] = []
        pending_bytes = 0
        for seg in group.segments:
            for h, data in segment_batches(fs, seg):
                plan.stats.bytes_read += len(data)
                plan.throttle.spend(len(data))
                if h.is_control:
                    kept = _clean_marker(h, data, plan, now_ms, delete_retention_ms,
                                         last=last_of_producer.get(h.producer_id)
                                         == h.base_offset or h.base_offset == group_last)
                else:
                    kept = _clean_batch(h, data, plan, now_ms, delete_retention_ms,
                                        is_aborted)
                    if kept is not None and h.is_transactional:
                        plan.txn_data_kept[h.producer_id] = True
                if kept is None and (h.base_offset == group_last
                                     or last_of_producer.get(h.producer_id) == h.base_offset):
                    # A producer's last batch keeps its state; the group's last
                    # batch keeps the group's end offset in the swap file, so a
                    # restart that finishes the swap replaces exactly the group.
                    kept = empty_batch(h)
                if kept is None:
                    continue
                pending.append(kept)
                pending_bytes += len(kept)
                if pending_bytes >= WRITE_BUFFER_BYTES:
                    check_parent()
                    plan.throttle.spend(pending_bytes)
                    handle.pwrite(position, pending)
                    position += pending_bytes
                    pending, pending_bytes = [], 0
        if pending:
            handle.pwrite(position, pending)
            position += pending_bytes
        plan.stats.bytes_written += position
    finally:
        handle.close()
    fs.fsync(group.cleaned_path)


def _clean_marker(
    h: BatchHeader, data: bytes, plan: CleanPlan, now_ms: int, delete_retention_ms: int,
    *, last: bool,
) -> bytes | None:
    """A marker stays while any data of its transaction stays (seen in this pass,
    which reads from the log start), and while it is its producer's last batch
    or its group's last. Once its data is gone it is stamped with a delete
    horizon; a pass after the horizon removes it. An ABORT marker's
    ``.txnindex`` entry, and the partition's aborted-transaction entry, go with
    it at the swap (:meth:`odradek.storage.log.Log.replace_segments`): a
    read_committed reader told of an abort whose marker is gone would skip the
    producer's later transactions."""
    pid = h.producer_id
    data_kept = plan.txn_data_kept.pop(pid, False)
    if data_kept or last:
        return data
    if h.attributes & ATTR_DELETE_HORIZON:
        if now_ms >= h.base_timestamp:
            plan.stats.markers_dropped += 1
            return None
        return data
    _, records = decode_batch(data)
    plan.stats.batches_rewritten += 1
    return build_batch(
        records, base_offset=h.base_offset, producer_id=pid, producer_epoch=h.producer_epoch,
        transactional=True, control=True, partition_leader_epoch=h.partition_leader_epoch,
        last_offset_delta=h.last_offset_delta, delete_horizon_ms=now_ms + delete_retention_ms,
        max_timestamp=h.max_timestamp)


def _clean_batch(
    h: BatchHeader, data: bytes, plan: CleanPlan, now_ms: int, delete_retention_ms: int,
    is_aborted: IsAborted,
) -> bytes | None:
    """The batch as it stays (the same bytes when nothing changes), or None."""
    if h.is_transactional and is_aborted(h.producer_id, h.base_offset):
        plan.stats.records_read += h.records_count
        return None
    _, section, spans = scan_batch(data)  # decide on keys alone, copy what stays
    plan.stats.records_read += len(spans)
    horizon = h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None
    keep: list[RecordSpan] = []
    tombstones = False
    for span in spans:
        if span.key is None:
            continue
        if span.offset >= plan.map_end:
            keep.append(span)  # past what the map covers: kept as it is
            continue
        if plan.offset_map.get(span.key) > span.offset:
            continue  # a later record has this key
        if span.null_value:
            if horizon is not None and now_ms >= horizon:
                plan.stats.tombstones_dropped += 1
                continue
            tombstones = True
        keep.append(span)
    plan.stats.records_kept += len(keep)
    if not keep:
        return None
    new_horizon = horizon if horizon is not None else (
        now_ms + delete_retention_ms if tombstones else None)
    if new_horizon == horizon:
        if len(keep) == len(spans):
            return data
        plan.stats.batches_rewritten += 1
        return keep_records(h, section, keep)
    # A new delete horizon becomes the base timestamp: records are re-encoded.
    offsets = {s.offset for s in keep}
    kept: list[Record] = [r for r in decode_batch(data)[1] if r.offset in offsets]
    plan.stats.batches_rewritten += 1
    return build_batch(
        kept, base_offset=h.base_offset, compression=h.compression,
        producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, transactional=h.is_transactional,
        partition_leader_epoch=h.partition_leader_epoch, log_append_time=h.log_append_time,
        last_offset_delta=h.last_offset_delta, delete_horizon_ms=new_horizon,
        max_timestamp=h.max_timestamp,
    )


def run_pass(
    fs: FileSystem, files: Sequence[SegmentFile], first_dirty: int, first_uncleanable: int,
    max_entries: int, segment_bytes: int, now_ms: int, delete_retention_ms: int,
    aborted: Sequence[tuple[int, int, int]], io_bytes_per_second: float = float("inf"),
) -> PassResult:
    """One whole pass over ``files`` (steps 2 and 3 of :mod:`odradek.storage.cleaner`): the
    cleaned files are written; nothing is swapped."""
    view = CleanerView(first_uncleanable, aborted)
    plan = CleanPlan(first_dirty, first_uncleanable, OffsetMap(max_entries),
                     throttle=Throttle(io_bytes_per_second))
    build_offset_map(fs, plan, files, view.is_aborted)
    plan.groups = group_segments(files, plan.map_end, segment_bytes)
    for group in plan.groups:
        clean_group(fs, group, plan, now_ms, delete_retention_ms, view.is_aborted)
    return PassResult(plan.map_end, [(g.first_index, len(g.segments), g.cleaned_path)
                                     for g in plan.groups], plan.stats)


@dataclass(frozen=True, slots=True)
class PassResult:
    map_end: int
    groups: list[tuple[int, int, str]]
    """(index of the first segment, number of segments, cleaned file) per group."""
    stats: CleanStats

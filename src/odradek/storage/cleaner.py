"""The log cleaner for one log: keep only the latest record of each key.

Kafka's semantics (``LogCleaner``), one pass at a time:

1. **Range.** The dirty range runs from the first dirty offset (the cleaner
   checkpoint; the log start at first) to the first uncleanable offset: the
   smallest of the active segment's base, the last stable offset (an open
   transaction stops the cleaner), and the base of the first segment holding
   a record newer than ``min.compaction.lag.ms``. Only whole inactive
   segments below it are cleaned.
2. **Offset map.** Every keyed record of the dirty range, from oldest to
   newest, maps the MD5 of its key to its offset, skipping control batches
   and batches of aborted transactions. The map holds at most ``max_entries``
   keys (``log.cleaner.dedupe.buffer.size`` / 24 bytes, Kafka's slot); when it
   is full the pass stops at the end of the last whole segment that fit, and
   the next pass goes on from there.
3. **Rewrite.** The segments from the log start to the map's end are
   rewritten in groups of at most ``segment.bytes``. A record stays when its
   offset is at or past the map's end (untouched, tombstone or not), or it is
   the latest for its key — unless it is a tombstone whose batch's delete
   horizon has passed. A record
   without a key goes. Aborted transactions' batches go whole. Control
   batches stay. A batch keeps its base offset, lastOffsetDelta, producer id,
   epoch and base sequence, leader epoch, codec and timestamp type; an intact
   batch is copied byte for byte. A batch that lost every record vanishes,
   unless it is the last batch of its producer in the group (then it stays as
   an empty batch, so producer state survives a rebuild) or the group's last
   batch (so the cleaned file ends where the group ends, and a restart that
   finishes a swap removes exactly the group's segments). The first pass that
   keeps a tombstone stamps its batch with a delete horizon
   (now + ``delete.retention.ms``, KIP-534); a pass after the horizon drops it.
4. **Swap** (:meth:`odradek.storage.log.Log.replace_segments`): the group is
   written to ``<base>.log.cleaned`` and fsynced off the event loop; on the
   loop the file becomes ``<base>.log.swap`` (the decision, made durable with
   a directory fsync), the old segments are renamed ``*.deleted``, and the swap
   file becomes ``<base>.log`` with fresh indexes. Start-up finishes a swap it
   finds (:mod:`odradek.storage.loader`) and removes a ``.cleaned`` file, so a
   kill -9 at any step leaves either the old segments or the new one.

Offsets never change: cleaning only removes records, leaving gaps, and the
log end, high watermark and log start stay where they were.

On the operating system's files a pass runs in a worker process
(:class:`CleanerPool`, ``spawn``): decoding records is CPU work that would
otherwise hold the broker's interpreter lock. A worker whose broker is gone
(kill -9) stops at its next check, and never writes a ``.cleaned`` file that
already exists.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import multiprocessing.pool
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from odradek.storage.config import CleanerSettings
from odradek.storage.fs import FileSystem
from odradek.storage.names import CLEANED_SUFFIX, LOG_SUFFIX, segment_path
from odradek.storage.segment import Segment
from odradek.wire.batch import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    read_batch_header,
    validate_batch,
)
from odradek.wire.primitives import DecodeError
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

if TYPE_CHECKING:
    from odradek.storage.config import LogConfig
    from odradek.storage.fs import FileSystem


class Log(Protocol):
    """What the cleaner reads of a log, and its swap
    (``odradek.storage.log.Log`` is one); a protocol, so that the cleaner does
    not import the log it cleans."""

    fs: FileSystem
    cleaner_checkpoint: int
    """Where the last pass ended (the first dirty offset), -1 before any."""

    @property
    def config(self) -> LogConfig: ...

    @property
    def dir_path(self) -> str: ...

    @property
    def segments(self) -> Sequence[Segment]: ...

    @property
    def active_segment(self) -> Segment: ...

    @property
    def recovery_point(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def replace_segments(self, old: Sequence[Segment], cleaned_path: str) -> bool: ...

__all__ = ["CleanJob", "CleanerSettings", "CleanerView", "OffsetMap", "plan_pass"]

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


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """What a pass needs of an inactive segment (picklable: a pass may run in a
    worker process)."""

    base_offset: int
    log_path: str
    dir_path: str
    size: int
    next_offset: int

    @classmethod
    def of(cls, seg: Segment) -> SegmentFile:
        return cls(seg.base_offset, seg.log_path, seg.dir_path, seg.size, seg.next_offset)


@dataclass(slots=True)
class Group:
    """Inactive segments rewritten into one (named by the first one's base)."""

    segments: list[SegmentFile]
    first_index: int = 0
    """Position of the first of them among the pass's segments."""
    cleaned_path: str = ""
    size: int = 0


class Throttle:
    """``log.cleaner.io.max.bytes.per.second``: after each read or write the pass
    sleeps as long as it is ahead of the rate (read and write bytes count
    together, as in Kafka)."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self.start = time.monotonic()
        self.spent = 0

    def spend(self, n: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        self.spent += n
        ahead = self.spent / self.rate - (time.monotonic() - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


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


def _segment_batches(
    fs: FileSystem, seg: SegmentFile, *, headers_only: bool = False
) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of an inactive segment (bytes empty with
    ``headers_only``), read with a handle of our own: the cleaner runs off the
    event loop. Recovery already accepted these bytes; a batch that does not
    check out raises DecodeError and the pass is abandoned."""
    handle = fs.open(seg.log_path)
    try:
        size = handle.size()
        pos = 0
        while pos < size:
            head = handle.pread(pos, 61)
            if len(head) < 61:
                return
            h = read_batch_header(head, 0)
            if headers_only:
                yield h, b""
            else:
                data = handle.pread(pos, h.size)
                if len(data) < h.size:
                    return
                validate_batch(data, 0)
                yield h, data
            pos += h.size
    finally:
        handle.close()


def cleanable_segments(segments: Sequence[Segment], first_uncleanable: int) -> list[Segment]:
    """The inactive segments wholly below ``first_uncleanable``."""
    out = []
    for seg, nxt in itertools.pairwise(segments):
        if nxt.base_offset > first_uncleanable:
            break
        out.append(seg)
    return out


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
        _check_parent()
        for h, data in _segment_batches(fs, seg):
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
        for h, _ in _segment_batches(fs, seg, headers_only=True):
            group_last = h.base_offset
            if h.producer_id >= 0:
                last_of_producer[h.producer_id] = h.base_offset
    _check_parent()
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
            for h, data in _segment_batches(fs, seg):
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
                    _check_parent()
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


# -- choosing and running a pass ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanerView:
    """What the partition layer tells the cleaner: the last stable offset (the
    cleaner never passes it) and which batches are aborted."""

    last_stable_offset: int
    aborted: Sequence[tuple[int, int, int]]
    """(producer id, first offset, marker offset) of each aborted transaction."""

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        return any(pid == producer_id and first <= offset <= last
                   for pid, first, last in self.aborted)


def first_uncleanable(log: Log, view: CleanerView, now_ms: int) -> int:
    """min(active segment base, LSO, recovery point (only flushed segments are
    cleaned, so no flush is ever under way on a segment the cleaner replaces),
    first segment with a record newer than ``min.compaction.lag.ms``)."""
    limit = min(log.active_segment.base_offset, view.last_stable_offset, log.recovery_point)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in log.segments[:-1]:
            if seg.max_timestamp()[0] > now_ms - lag:
                limit = min(limit, seg.base_offset)
                break
    return limit


def dirty_ratio(log: Log, first_dirty: int, uncleanable: int) -> tuple[float, int]:
    """(dirty bytes / cleanable bytes, dirty bytes) below ``uncleanable``."""
    segments = cleanable_segments(log.segments, uncleanable)
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    return (dirty / total if total else 0.0), dirty


def needs_cleaning(log: Log, first_dirty: int, uncleanable: int, now_ms: int) -> float:
    """The log's dirty ratio when it is due for cleaning (above its
    ``min.cleanable.dirty.ratio``, or a dirty segment older than
    ``max.compaction.lag.ms``), else -1."""
    ratio, dirty = dirty_ratio(log, first_dirty, uncleanable)
    if dirty == 0:
        return -1.0
    if ratio >= log.config.min_cleanable_dirty_ratio:
        return ratio
    max_lag = log.config.max_compaction_lag_ms
    for seg in cleanable_segments(log.segments, uncleanable):
        if seg.next_offset > first_dirty and _first_timestamp(seg) < now_ms - max_lag:
            return ratio
    return -1.0


def _first_timestamp(seg: Segment) -> int:
    """The first batch's first timestamp (what ``max.compaction.lag.ms`` is
    measured from); the newest one if it cannot be read."""
    try:
        return read_batch_header(seg.read(0, 61), 0).base_timestamp
    except (OSError, DecodeError):
        return seg.max_timestamp()[0]


def run_pass(
    fs: FileSystem, files: Sequence[SegmentFile], first_dirty: int, first_uncleanable: int,
    max_entries: int, segment_bytes: int, now_ms: int, delete_retention_ms: int,
    aborted: Sequence[tuple[int, int, int]], io_bytes_per_second: float = float("inf"),
) -> PassResult:
    """One whole pass over ``files`` (steps 2 and 3 of the module docstring): the
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


_PARENT: int | None = None
"""In a cleaner worker: the broker's pid (the worker stops if the broker is gone)."""


def _check_parent() -> None:
    """A worker whose broker died (kill -9 leaves it running) stops writing at
    once: the restarted broker removes its files and cleans again."""
    if _PARENT is not None and os.getppid() != _PARENT:
        raise SystemExit("the broker is gone")


def _run_pass_in_worker(parent: int, *args: object) -> PassResult:
    """:func:`run_pass` in a worker process, on the operating system's files."""
    from odradek.storage.fs import OsFileSystem

    global _PARENT
    _PARENT = parent
    return run_pass(OsFileSystem(), *args)  # type: ignore[arg-type]


class CleanerStopped(Exception):
    """The broker is stopping: the pass was abandoned."""


class CleanerPool:
    """The worker process that runs passes (``log.cleaner.threads``): decoding and
    rewriting records is CPU work, and in a process of its own it does not hold
    the broker's interpreter lock while requests are served."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(workers, 1)
        self._pool: multiprocessing.pool.Pool | None = None
        self._closed = False

    def submit(self, *args: object) -> PassResult:
        """Run a pass in the worker and wait for it (from a thread, not the loop)."""
        pool = self._pool
        if pool is None:
            if self._closed:
                raise CleanerStopped("the cleaner is stopped")
            pool = self._pool = multiprocessing.get_context("spawn").Pool(self.workers)
        pending = pool.apply_async(_run_pass_in_worker, (os.getpid(), *args))
        while True:
            try:
                result: PassResult = pending.get(timeout=0.2)
                return result
            except multiprocessing.TimeoutError:
                if self._closed:
                    raise CleanerStopped("the cleaner stopped during a pass") from None

    def close(self) -> None:
        """Stop the worker at once (a pass under way leaves a ``.cleaned`` file that
        the next start-up removes)."""
        self._closed = True
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


@dataclass(slots=True)
class CleanJob:
    """One pass over one log: :meth:`run` (off the event loop, in the cleaner's
    worker process when the log is on the operating system's files) writes the
    cleaned groups; :meth:`complete` (on the loop) swaps them in."""

    log: Log
    fs: FileSystem
    plan: CleanPlan
    segments: list[Segment]
    view: CleanerView
    now_ms: int
    done: Callable[[CleanJob, BaseException | None], None]
    pool: CleanerPool | None = None
    io_bytes_per_second: float = float("inf")
    swapped: int = 0
    result: PassResult | None = None

    def run(self) -> None:
        files = [SegmentFile.of(s) for s in self.segments]
        args = (files, self.plan.first_dirty, self.plan.first_uncleanable,
                self.plan.offset_map.max_entries, self.log.config.segment_bytes, self.now_ms,
                self.log.config.delete_retention_ms, list(self.view.aborted),
                self.io_bytes_per_second)
        if self.pool is not None:
            self.result = self.pool.submit(*args)
        else:
            self.result = run_pass(self.fs, *args)
        self.plan.map_end = self.result.map_end
        self.plan.stats = self.result.stats
        self.plan.groups = [Group(files[first:first + count], first, cleaned)
                            for first, count, cleaned in self.result.groups]

    def complete(self, error: BaseException | None = None) -> None:
        groups = self.result.groups if self.result is not None else []
        if error is None:
            for first, count, cleaned in groups:
                if self.log.replace_segments(self.segments[first:first + count], cleaned):
                    self.swapped += 1
                else:
                    break
            if self.swapped == len(groups):
                self.log.cleaner_checkpoint = self.plan.map_end
        else:
            for _, _, cleaned in groups:
                if cleaned and self.fs.exists(cleaned):
                    self.fs.remove(cleaned)
        self.done(self, error)


def plan_pass(
    log: Log, view: CleanerView, settings: CleanerSettings, now_ms: int,
    done: Callable[[CleanJob, BaseException | None], None], *, force: bool = False,
    pool: CleanerPool | None = None,
) -> CleanJob | None:
    """A pass over ``log`` if it is due (``force``: if it has anything dirty)."""
    first_dirty = log.cleaner_checkpoint
    if not log.log_start_offset <= first_dirty <= log.log_end_offset:
        first_dirty = log.log_start_offset
    uncleanable = first_uncleanable(log, view, now_ms)
    if force:
        due = dirty_ratio(log, first_dirty, uncleanable)[1] > 0
    else:
        due = needs_cleaning(log, first_dirty, uncleanable, now_ms) >= 0
    if not due:
        return None
    segments = cleanable_segments(log.segments, uncleanable)
    plan = CleanPlan(first_dirty, uncleanable, OffsetMap(settings.max_map_entries))
    return CleanJob(log, log.fs, plan, list(segments), view, now_ms, done, pool,
                    settings.io_max_bytes_per_second)

"""Which log the cleaner cleans, and how far: step 1 of :mod:`odradek.storage.cleaner`.

Pure policy over what a log exposes (the :class:`Log` protocol); no file is
written here, and only a segment's first batch header is read (for
``max.compaction.lag.ms``).

* **Range.** The dirty range runs from the first dirty offset (the cleaner
  checkpoint; the log start at first) to the first uncleanable offset
  (:func:`first_uncleanable`): the smallest of the active segment's base, the
  last stable offset (an open transaction stops the cleaner), the recovery
  point, and the base of the first segment holding a record newer than
  ``min.compaction.lag.ms``. Only whole inactive segments below it are cleaned
  (:func:`cleanable_segments`).
* **Due.** A log is due (:func:`needs_cleaning`) when its dirty ratio, dirty
  bytes over cleanable bytes below the first uncleanable offset, reaches
  ``min.cleanable.dirty.ratio``, or when a dirty segment's first record is
  older than ``max.compaction.lag.ms``. Of the logs due, the one with the
  highest ratio is cleaned next (:func:`dirtiest_log`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.storage.config import LogConfig
from odradek.storage.fs import FileSystem
from odradek.storage.segment import Segment
from odradek.wire.batch import read_batch_header
from odradek.wire.primitives import DecodeError


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


def cleanable_segments(segments: Sequence[Segment], first_uncleanable: int) -> list[Segment]:
    """The inactive segments wholly below ``first_uncleanable``."""
    out = []
    for seg, nxt in itertools.pairwise(segments):
        if nxt.base_offset > first_uncleanable:
            break
        out.append(seg)
    return out


def first_dirty_offset(log: Log) -> int:
    """Where a pass over ``log`` starts: where the last one ended, or the log start
    when that is outside the log (before any pass, or after a truncation)."""
    first_dirty = log.cleaner_checkpoint
    if not log.log_start_offset <= first_dirty <= log.log_end_offset:
        first_dirty = log.log_start_offset
    return first_dirty


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


def dirtiest_log(candidates: Iterable[tuple[Log, CleanerView]], now_ms: int,
                 stats: MutableMapping[str, float]) -> tuple[Log, CleanerView] | None:
    """The candidate due for cleaning with the highest dirty ratio, with its view
    (Kafka's ``grabFilthiestCompactedLog``), or None; ``stats["max_dirty_ratio"]``
    keeps the highest ratio of a log due seen, ``stats["last_max_dirty_ratio"]``
    the highest ratio of any candidate, due or not, in this look (0 without
    one: Kafka's ``max-dirty-percent``, as a ratio)."""
    best: tuple[float, Log, CleanerView] | None = None
    look_max = 0.0
    for log, view in candidates:
        first_dirty = first_dirty_offset(log)
        uncleanable = first_uncleanable(log, view, now_ms)
        look_max = max(look_max, dirty_ratio(log, first_dirty, uncleanable)[0])
        ratio = needs_cleaning(log, first_dirty, uncleanable, now_ms)
        stats["max_dirty_ratio"] = max(stats["max_dirty_ratio"], ratio)
        if ratio >= 0 and (best is None or ratio > best[0]):
            best = (ratio, log, view)
    stats["last_max_dirty_ratio"] = look_max
    return None if best is None else (best[1], best[2])

"""The log cleaner for one log: keep only the latest record of each key.

Kafka's semantics (``LogCleaner``), one pass at a time:

1. **Range** (:mod:`odradek.storage.cleaner_policy`, which also says when a
   log is due). The dirty range runs from the first dirty offset (the cleaner
   checkpoint; the log start at first) to the first uncleanable offset: the
   smallest of the active segment's base, the last stable offset (an open
   transaction stops the cleaner), and the base of the first segment holding
   a record newer than ``min.compaction.lag.ms``. Only whole inactive
   segments below it are cleaned.
2. **Offset map** (:mod:`odradek.storage.cleaner_pass`, as is step 3). Every
   keyed record of the dirty range, from oldest to newest, maps the MD5 of
   its key to its offset, skipping control batches
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
(:class:`CleanerPool`, ``spawn``; :mod:`odradek.storage.cleaner_worker`):
decoding records is CPU work that would otherwise hold the broker's
interpreter lock. A worker whose broker is gone (kill -9) stops at its next
check, and never writes a ``.cleaned`` file that already exists.

This module holds what the log manager drives: :func:`plan_pass` decides
whether a log gets a pass, and the :class:`CleanJob` it returns runs the pass
off the event loop and swaps its result in on the loop. The names of the
modules above are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.storage.cleaner_io import SegmentFile, Throttle
from odradek.storage.cleaner_pass import (
    WRITE_BUFFER_BYTES,
    CleanPlan,
    CleanStats,
    Group,
    IsAborted,
    OffsetMap,
    PassResult,
    build_offset_map,
    clean_group,
    group_segments,
    key_digest,
    run_pass,
)
from odradek.storage.cleaner_policy import (
    CleanerView,
    Log,
    cleanable_segments,
    dirtiest_log,
    dirty_ratio,
    first_dirty_offset,
    first_uncleanable,
    needs_cleaning,
)
from odradek.storage.cleaner_worker import CleanerPool, CleanerStopped
from odradek.storage.config import CleanerSettings
from odradek.storage.fs import FileSystem
from odradek.storage.segment import Segment

__all__ = [
    "WRITE_BUFFER_BYTES",
    "CleanJob",
    "CleanPlan",
    "CleanStats",
    "CleanerPool",
    "CleanerSettings",
    "CleanerStopped",
    "CleanerView",
    "Group",
    "IsAborted",
    "Log",
    "OffsetMap",
    "PassResult",
    "SegmentFile",
    "Throttle",
    "build_offset_map",
    "clean_group",
    "cleanable_segments",
    "dirtiest_log",
    "dirty_ratio",
    "first_dirty_offset",
    "first_uncleanable",
    "group_segments",
    "key_digest",
    "needs_cleaning",
    "plan_pass",
    "run_pass",
]


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
    first_dirty = first_dirty_offset(log)
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

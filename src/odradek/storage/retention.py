"""Which whole segments retention deletes: by log start, time and size (a pure policy).

A segment may go only when every offset in it is below the high watermark.
Kafka's rules, in order, each deleting from the oldest segment and stopping at
the first one that does not qualify:

1. log start: the segment's successor starts at or below ``log_start_offset``
   (DeleteRecords moved the start past the whole segment);
2. ``retention.ms``: the segment's newest timestamp (its file's mtime when no
   batch has a timestamp) is more than ``retention.ms`` old;
3. ``retention.bytes``: deleting the segment keeps the log at or above
   ``retention.bytes``.

:func:`segments_to_delete` is the policy, without side effects; the log
applies it (:meth:`~odradek.storage.log.Log.delete_old_segments`). Rules 2
and 3 apply only when ``cleanup.policy`` includes ``delete``: a compact-only
log (``__consumer_offsets``) is never shortened by age or size.

The active segment is never deleted while active: when every segment
qualifies, the log first rolls (so the data goes and appends continue in a new
empty segment at the same log end offset), which is what Kafka does.

Deleted segments are renamed ``*.deleted`` and removed ``file.delete.delay.ms``
later, so a ``sendfile`` already under way finishes on the open descriptor
(:class:`~odradek.storage.local_log.LocalLog` does both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from odradek.storage.index import NO_TIMESTAMP
from odradek.storage.segment import Segment

if TYPE_CHECKING:
    from odradek.storage.config import LogConfig


class Log(Protocol):
    """What retention reads of a log (``odradek.storage.log.Log`` is one); a
    protocol, so that this policy does not import the log it rules."""

    @property
    def config(self) -> LogConfig: ...

    @property
    def segments(self) -> Sequence[Segment]: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...

Predicate = Callable[[Segment, int], bool]


def _extend(log: Log, segments: Sequence[Segment], n: int, predicate: Predicate) -> int:
    """How many oldest segments go once ``predicate`` is applied from segment ``n``
    on, stopping at the first that does not qualify or is not wholly below the HW."""
    while n < len(segments):
        seg = segments[n]
        last = n == len(segments) - 1
        # (The active segment's end counts its pending writes: never deleted under them.)
        upper = log.next_offset if last else segments[n + 1].base_offset
        if upper > log.high_watermark or (last and seg.size == 0):
            break
        if not predicate(seg, upper):
            break
        n += 1
    return n


def segments_to_delete(log: Log, now_ms: int, *, start_only: bool = False) -> list[Segment]:
    """The oldest segments that retention deletes now (the rules of the module doc,
    in order). Pure: reads the log, changes nothing; :meth:`Log.remove_segments`
    applies the answer. ``start_only`` applies rule 1 alone (DeleteRecords)."""
    segments = log.segments
    start = log.log_start_offset
    n = _extend(log, segments, 0, lambda seg, upper: upper <= start)
    cfg = log.config
    if start_only or "delete" not in cfg.cleanup_policy.split(","):
        # cleanup.policy=compact alone: time and size retention never delete
        # (Kafka); such a log shrinks only by compaction and DeleteRecords.
        return list(segments[:n])
    if cfg.retention_ms >= 0:
        limit = cfg.retention_ms
        n = _extend(log, segments, n, lambda seg, _: now_ms - _newest_ms(seg) > limit)
    if cfg.retention_bytes >= 0:
        excess = log.size_bytes - sum(seg.size for seg in segments[:n]) - cfg.retention_bytes

        def over_size(seg: Segment, _: int) -> bool:
            nonlocal excess
            if excess - seg.size < 0:
                return False
            excess -= seg.size
            return True

        n = _extend(log, segments, n, over_size)
    return list(segments[:n])


def _newest_ms(seg: Segment) -> int:
    ts = seg.max_timestamp()[0]
    if ts > NO_TIMESTAMP:
        return ts
    return seg.fs.mtime_ms(seg.log_path)

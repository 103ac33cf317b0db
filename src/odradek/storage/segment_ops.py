"""What the local log decides about, and does to, one segment through the
segment's own methods (Kafka keeps both in ``LogSegment``).

* **Roll** (:func:`should_roll`, Kafka's ``shouldRoll``): the active segment
  is due to roll before an append when the append would take it past
  ``segment.bytes``, when ``segment.ms`` has passed since its first batch's
  timestamp (since it was created, before it has one), when either index is
  full, or when the append's last offset would not fit a 32-bit offset
  relative to its base. An empty segment never rolls.
* **Cut** (:func:`cut_at_batch`): a truncation
  (:meth:`odradek.storage.local_log.LocalLog.truncate_to`) keeps a segment's
  batches up to a boundary and drops the rest: the ``.log`` file is
  truncated at the boundary, both indexes lose every entry at or past the
  first dropped offset, and the newest timestamp is found again from the last
  time-index entry left and the headers after the last offset-index entry
  left. Nothing is fsynced here: the caller makes the cut durable before
  anything is appended over it.
"""

from __future__ import annotations

from odradek.storage.config import INT_MAX, LogConfig
from odradek.storage.index import NO_TIMESTAMP
from odradek.storage.segment import Segment


def should_roll(seg: Segment, config: LogConfig, reserved: int, size: int, max_ts: int,
                last_offset: int, now_ms: int) -> bool:
    """Is the active segment ``seg`` (``reserved`` bytes, pending writes included)
    due to roll before an append of ``size`` bytes whose newest timestamp is
    ``max_ts`` and last offset ``last_offset`` (see the module doc)?"""
    if reserved == 0:
        return False
    rolling = seg.rolling_timestamp()
    waited = max_ts - rolling if rolling >= 0 else now_ms - seg.created_ms
    return (
        reserved > config.segment_bytes - size
        or waited > config.segment_ms
        or seg.offset_index().is_full
        or seg.time_index().is_full
        or last_offset - seg.base_offset > INT_MAX
    )


def cut_at_batch(seg: Segment, position: int, next_offset: int) -> None:
    """Cut ``seg`` at ``position`` (a batch boundary; ``next_offset`` is the base offset
    of the batch that started there) and bring its indexes and counters along."""
    oi = seg.offset_index()
    ti = seg.time_index()
    seg.log_handle().truncate(position)
    seg.dirty = True
    seg.size = position
    oi.truncate_to_offset(next_offset)
    ti.truncate_to_offset(next_offset)
    last = oi.last()
    start = 0 if last is None else last[1]
    max_ts, max_off = ti.last() or (NO_TIMESTAMP, seg.base_offset)
    for _, h in seg.iter_headers(start, position):
        if h.max_timestamp > max_ts:
            max_ts, max_off = h.max_timestamp, h.last_offset
    seg.install_indexes(oi, ti, bytes_since_index=position - start,
                        max_ts=(max_ts, max_off), next_offset=next_offset)
    if position == 0:
        seg.forget_rolling_timestamp()

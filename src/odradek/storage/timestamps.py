"""Offsets by timestamp: Kafka's ListOffsets semantics over batch headers.

Storage reads batch headers, never records, so answers are exact to the batch:

* ``timestamp >= 0``: the first batch, at or after the log start, whose max
  timestamp is >= ``timestamp``. The offset returned is that batch's base
  offset (or the log start, if the batch straddles it) and the timestamp its
  max timestamp. A consumer that starts there sees every record with a
  timestamp >= the target, and possibly some older records of that same batch;
  fetches return whole batches anyway. Kafka returns the exact record; a
  caller that can decode records passes ``record_search`` to get the same.
* ``MAX_TIMESTAMP`` (-3, KIP-734): the first batch holding the log's largest
  timestamp. Kafka 3.8 and later (KAFKA-16310) return the offset of the first
  record carrying that timestamp; earlier versions returned the batch's last
  offset. Without ``record_search`` we return the batch's base offset, which is
  exact for LogAppendTime batches (every record has the batch's timestamp) and
  a lower bound otherwise.
* ``EARLIEST`` (-2) and ``EARLIEST_LOCAL`` (-4): the log start offset;
  ``LATEST`` (-1): the last fetchable offset (the HW for consumers);
  ``LATEST_TIERED`` (-5): -1 (no tiered storage). These return timestamp -1.

A result at or beyond the last fetchable offset is not returned, as in Kafka.
Not found is ``TimestampOffset(-1, -1)``.

The search: take the first segment whose newest timestamp reaches the target;
in its time index find the last entry with a timestamp below the target (every
batch up to that entry's offset is older), then scan batch headers from the
next batch. The scan ends by the next time-index entry, so it reads at most
about ``index.interval.bytes`` of headers when timestamps increase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from odradek.storage.segment import Segment
from odradek.wire.batch import BatchHeader

LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5
NO_TIMESTAMP: Final = -1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int
    leader_epoch: int = -1


NOT_FOUND: Final = TimestampOffset(NO_TIMESTAMP, -1)


class RecordTimestampSearch(Protocol):
    def __call__(self, batch: bytes, target_timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record of ``batch`` (the bytes of one whole
        batch) whose timestamp is >= ``target_timestamp``; None if there is none."""
        ...


def list_offsets(
    segments: Sequence[Segment],
    log_start: int,
    limit: int,
    timestamp: int,
    record_search: RecordTimestampSearch | None,
) -> TimestampOffset:
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampOffset(NO_TIMESTAMP, log_start)
    if timestamp == LATEST_TIMESTAMP:
        return TimestampOffset(NO_TIMESTAMP, limit)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found = _max_timestamp_batch(segments)
        target = found[2].max_timestamp if found is not None else 0
    elif timestamp >= 0:
        found = _first_batch_at_or_after(segments, log_start, timestamp)
        target = timestamp
    else:
        raise ValueError(f"unknown ListOffsets timestamp {timestamp}")
    if found is None:
        return NOT_FOUND
    seg, position, header = found
    offset, ts = header.base_offset, header.max_timestamp
    if record_search is not None:
        exact = record_search(seg.read(position, header.size), target)
        if exact is not None:
            offset, ts = exact
    offset = max(offset, log_start)
    if offset >= limit:
        return NOT_FOUND
    epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
    return TimestampOffset(ts, offset, epoch)


Found = tuple[Segment, int, BatchHeader]


def _first_batch_at_or_after(
    segments: Sequence[Segment], log_start: int, timestamp: int
) -> Found | None:
    for seg in segments:
        if seg.size == 0 or seg.next_offset <= log_start:
            continue
        if seg.max_timestamp()[0] < timestamp:
            continue
        found = _search_segment(seg, log_start, timestamp)
        if found is not None:
            return seg, found[0], found[1]
    return None


def _search_segment(seg: Segment, log_start: int, timestamp: int) -> tuple[int, BatchHeader] | None:
    for attempt in range(2):
        entry = seg.time_index().lookup_before(timestamp)
        if entry is not None and not seg.entry_holds(entry):
            if attempt:
                entry = None
            else:
                seg.rebuild_indexes()
                continue
        start = max(entry[1] + 1 if entry is not None else seg.base_offset, log_start)
        first = seg.find_batch(start)
        if first is None:
            return None
        for pos, h in seg.iter_headers(first[0]):
            if h.max_timestamp >= timestamp and h.last_offset >= log_start:
                return pos, h
        return None
    return None


def _max_timestamp_batch(segments: Sequence[Segment]) -> Found | None:
    best: tuple[int, int, Segment] | None = None
    for seg in segments:
        if seg.size == 0:
            continue
        ts, offset = seg.max_timestamp()
        if ts > NO_TIMESTAMP and (best is None or ts > best[0]):
            best = (ts, offset, seg)
    if best is None:
        return None
    _, offset, seg = best
    found = seg.find_batch(offset)
    if found is None:
        return None
    return seg, found[0], found[1]

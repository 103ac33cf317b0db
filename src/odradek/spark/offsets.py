"""Offsets of a streaming query, and how a trigger's range is cut into tasks.

A source offset is ``{"topic": {"partition": next_offset, ...}, ...}`` — the
JSON of Spark's ``KafkaSourceOffset``, so checkpoints read the same. Spark
compares offsets as JSON *strings*, so :func:`to_json` always builds topics
and partitions in sorted order (partitions numerically); two equal positions
give equal strings.

Pure functions only: no client, no Spark.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}


def rate_limit(start: Offsets, latest: Offsets, limit: int) -> Offsets:
    """Spark's ``rateLimit``: at most ``limit`` records past ``start`` in all, shared
    in proportion to each partition's backlog; a partition whose share is below
    one still gets one (never starved), others are rounded down. Partitions new
    since ``start`` begin at 0 here; the caller puts their real start in
    ``start``."""
    sizes = {tp: end - start.get(tp, 0) for tp, end in latest.items()}
    sizes = {tp: size for tp, size in sizes.items() if size > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start.get(tp, 0) + step)
    return out


@dataclass(frozen=True)
class Range:
    """Offsets ``[start, end)`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split(ranges: list[Range], min_partitions: int | None) -> list[Range]:
    """Cut ranges so there are at least ``min_partitions`` tasks (when there are
    that many offsets): each range gets pieces in proportion to its size,
    rounded up, of near-equal length. Empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[Range] = []
    for r in ranges:
        parts = max(1, math.ceil(r.size * min_partitions / total))
        parts = min(parts, r.size)
        step = r.size / parts
        bounds = [r.start + round(i * step) for i in range(parts)] + [r.end]
        out.extend(Range(r.topic, r.partition, a, b)
                   for a, b in itertools.pairwise(bounds) if b > a)
    return out

"""Consumer lag of the groups a group coordinator holds, as kafka-exporter reports it.

Pure: the coordinator's groups and two lookups in (the partition count of a
topic, the end offsets of a partition), rows out. The IO shell
(:mod:`odradek.broker.coordinators.lag_metrics`) calls it when the registry is
rendered (a scrape), so the commit path does no work for it.

What is reported, per group (after danielqsj/kafka_exporter, so its dashboards
and alert rules work unchanged):

* a group's *topics* are those it has committed at least one offset on;
  every partition of such a topic (as the metadata has it now) is a row, the
  partitions without a commit with ``committed = -1`` and ``lag = -1``
  (kafka-exporter's convention: dashboards filter ``>= 0``);
* ``lag = high watermark - committed``: the "log end offset" of
  ``kafka-consumer-groups.sh`` and ``odradek groups describe`` is what
  ListOffsets(LATEST) answers a read_uncommitted consumer, the high watermark;
  ``stable_lag = last stable offset - committed`` is the lag of a
  read_committed consumer (the LSO is below the HW while a transaction is
  open). Neither is clamped at 0 (a commit past the end shows as negative, as
  the CLI shows it);
* ``lag is None`` when the partition's end offsets are not known (led by
  another broker whose answer has not come yet): the row's committed offset is
  still reported, its lag is not;
* a topic no longer in the metadata (deleted; its offsets go at the next
  clean-up) has no rows; a group being deleted (Dead) or whose
  ``__consumer_offsets`` partition is still loading has none either;
* the lag sum of (group, topic) adds the lags of its committed partitions
  whose end is known (no ``-1``).

Group counts follow Kafka's GroupMetadataManager gauges: every group, and the
classic groups by state; KIP-848 consumer groups by their own states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.coordinator.group import Group, GroupState

NO_OFFSET = -1
"""The committed offset (and lag) of a partition the group has not committed."""


@dataclass(frozen=True, slots=True)
class Ends:
    """What a consumer can read of a partition: below ``high_watermark``
    (read_uncommitted) or ``last_stable_offset`` (read_committed)."""

    high_watermark: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int
    """The committed offset; :data:`NO_OFFSET` when there is none."""
    lag: int | None
    """High watermark - committed; -1 without a commit; None when the end is unknown."""
    stable_lag: int | None
    """Last stable offset - committed, likewise."""


@dataclass(slots=True)
class LagReport:
    partitions: list[PartitionLag] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)
    """Group -> its member count (every group served, with or without offsets)."""
    unknown: set[tuple[str, int]] = field(default_factory=set)
    """(topic, partition) whose ends were asked for and not known."""

    def sums(self, stable: bool = False) -> dict[tuple[str, str], int]:
        """(group, topic) -> the sum of its known lags of committed partitions."""
        out: dict[tuple[str, str], int] = {}
        for row in self.partitions:
            key = (row.group, row.topic)
            lag = row.stable_lag if stable else row.lag
            total = out.setdefault(key, 0)
            if row.committed >= 0 and lag is not None:
                out[key] = total + lag
        return out


def consumer_lag(
    groups: Iterable[Group],
    partition_count: Callable[[str], int | None],
    ends: Callable[[str, int], Ends | None],
) -> LagReport:
    """The lag rows of ``groups`` (those this coordinator serves: the caller
    leaves out groups whose partition is loading). ``partition_count``: the
    topic's partitions now, None when it does not exist; ``ends``: the
    partition's end offsets, None when unknown."""
    report = LagReport()
    for group in groups:
        if group.state is GroupState.DEAD:
            continue
        report.members[group.group_id] = member_count(group)
        committed: dict[str, dict[int, int]] = {}
        for (topic, partition), value in group.offsets.items():
            committed.setdefault(topic, {})[partition] = value.offset
        for topic in sorted(committed):
            count = partition_count(topic)
            if count is None:
                continue  # deleted
            offsets = committed[topic]
            for partition in range(count):
                current = offsets.get(partition, NO_OFFSET)
                end = ends(topic, partition)
                if end is None:
                    report.unknown.add((topic, partition))
                lag = _lag(current, end.high_watermark if end else None)
                stable = _lag(current, end.last_stable_offset if end else None)
                report.partitions.append(
                    PartitionLag(group.group_id, topic, partition, current, lag, stable))
    return report


def _lag(committed: int, end: int | None) -> int | None:
    if committed < 0:
        return NO_OFFSET
    return None if end is None else end - committed


def member_count(group: Group) -> int:
    return len(group.consumer.members) if group.consumer is not None else len(group.members)


CLASSIC_STATES = tuple(GroupState)
"""Kafka's NumGroups<State> gauges, one per classic group state."""


def group_counts(groups: Iterable[Group]) -> tuple[int, dict[str, int], dict[str, int]]:
    """(every group, classic groups by state name, consumer groups by state name);
    every classic state is present (0 when none), consumer states when seen."""
    total = 0
    classic = {s.value: 0 for s in CLASSIC_STATES}
    consumer: dict[str, int] = {}
    for group in groups:
        total += 1
        if group.consumer is None:
            classic[group.state.value] += 1
        else:
            name = group.consumer.state().value
            consumer[name] = consumer.get(name, 0) + 1
    return total, classic, consumer

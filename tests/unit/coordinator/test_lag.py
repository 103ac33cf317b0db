"""Consumer lag arithmetic (odradek.coordinator.lag): kafka-exporter's rows and sums."""

from __future__ import annotations

from odradek.coordinator.consumer.model import ConsumerGroup, ConsumerMember
from odradek.coordinator.group import Group, GroupState, Member
from odradek.coordinator.lag import NO_OFFSET, Ends, consumer_lag, group_counts
from odradek.wire.internal.offset_commit_value import OffsetCommitValue


def _group(gid: str, offsets: dict[tuple[str, int], int], **kw: object) -> Group:
    group = Group(gid, **kw)  # type: ignore[arg-type]
    group.offsets = {k: OffsetCommitValue(offset=v) for k, v in offsets.items()}
    return group


def _member(mid: str) -> Member:
    return Member(mid, None, "c", "/127.0.0.1", 10_000, 10_000, "consumer", [])


COUNTS = {"orders": 3, "payments": 2, "other": 1}
ENDS = {("orders", 0): Ends(100, 100), ("orders", 1): Ends(50, 50), ("orders", 2): Ends(7, 7),
        ("payments", 0): Ends(20, 20), ("payments", 1): Ends(30, 30), ("other", 0): Ends(5, 5)}


def _rows(groups: list[Group], ends: dict[tuple[str, int], Ends] = ENDS,
          counts: dict[str, int] = COUNTS,
          ) -> dict[tuple[str, str, int], tuple[int, object, object]]:
    report = consumer_lag(groups, counts.get, lambda t, p: ends.get((t, p)))
    return {(r.group, r.topic, r.partition): (r.committed, r.lag, r.stable_lag)
            for r in report.partitions}


def test_two_topics_every_partition_of_a_committed_topic() -> None:
    g = _group("g", {("orders", 0): 90, ("orders", 1): 50, ("payments", 1): 10})
    rows = _rows([g])
    assert rows == {
        ("g", "orders", 0): (90, 10, 10),
        ("g", "orders", 1): (50, 0, 0),
        ("g", "orders", 2): (NO_OFFSET, NO_OFFSET, NO_OFFSET),  # no commit: -1, as kafka-exporter
        ("g", "payments", 0): (NO_OFFSET, NO_OFFSET, NO_OFFSET),
        ("g", "payments", 1): (10, 20, 20),
    }  # "other": never committed, so not the group's topic


def test_sums_leave_out_partitions_without_commit() -> None:
    g = _group("g", {("orders", 0): 90, ("orders", 1): 40, ("payments", 1): 10})
    report = consumer_lag([g], COUNTS.get, lambda t, p: ENDS.get((t, p)))
    assert report.sums() == {("g", "orders"): 20, ("g", "payments"): 20}


def test_deleted_topic_has_no_rows() -> None:
    g = _group("g", {("gone", 0): 3, ("orders", 2): 7})
    rows = _rows([g])
    assert not any(topic == "gone" for _, topic, _ in rows)
    assert rows[("g", "orders", 2)] == (7, 0, 0)


def test_open_transaction_lso_below_the_end() -> None:
    ends = {("orders", 0): Ends(high_watermark=100, last_stable_offset=60)}
    g = _group("g", {("orders", 0): 50})
    rows = _rows([g], ends, {"orders": 1})
    assert rows[("g", "orders", 0)] == (50, 50, 10)
    report = consumer_lag([g], {"orders": 1}.get, lambda t, p: ends.get((t, p)))
    assert report.sums() == {("g", "orders"): 50}
    assert report.sums(stable=True) == {("g", "orders"): 10}


def test_unknown_end_reports_the_offset_not_the_lag() -> None:
    g = _group("g", {("orders", 0): 5})
    report = consumer_lag([g], {"orders": 1}.get, lambda t, p: None)
    [row] = report.partitions
    assert (row.committed, row.lag, row.stable_lag) == (5, None, None)
    assert report.unknown == {("orders", 0)}
    assert report.sums() == {("g", "orders"): 0}


def test_commit_past_the_end_is_negative_not_clamped() -> None:
    g = _group("g", {("other", 0): 8})
    assert _rows([g])[("g", "other", 0)] == (8, -3, -3)


def test_dead_group_is_left_out_members_counted() -> None:
    dead = _group("dead", {("orders", 0): 1}, state=GroupState.DEAD)
    live = _group("live", {}, state=GroupState.STABLE)
    live.add(_member("m1"))
    live.add(_member("m2"))
    report = consumer_lag([dead, live], COUNTS.get, lambda t, p: ENDS.get((t, p)))
    assert report.partitions == []
    assert report.members == {"live": 2}


def test_group_counts_by_state() -> None:
    stable = _group("a", {}, state=GroupState.STABLE)
    empty = _group("b", {})
    preparing = _group("c", {}, state=GroupState.PREPARING_REBALANCE)
    modern = _group("d", {})
    modern.consumer = ConsumerGroup()
    modern.consumer.members["m"] = ConsumerMember("m")
    total, classic, consumer = group_counts([stable, empty, preparing, modern])
    assert total == 4
    assert classic == {"Empty": 1, "PreparingRebalance": 1, "CompletingRebalance": 0,
                       "Stable": 1, "Dead": 0}
    assert sum(consumer.values()) == 1
    assert consumer_lag([modern], COUNTS.get, lambda t, p: None).members == {"d": 1}

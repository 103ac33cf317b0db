"""Kafka's proportional rate limit and task splitting, as pure functions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.offsets import Range, from_json, rate_limit, split, to_json


def test_offsets_json_is_sorted_and_round_trips() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("a", 10): 1, ("b", 1): 0}
    value = to_json(offsets)
    assert list(value) == ["a", "b"]
    assert list(value["a"]) == ["2", "10"]  # numeric order, not string order
    assert from_json(value) == offsets
    assert to_json(dict(reversed(list(offsets.items())))) == value


def test_rate_limit_splits_like_kafka() -> None:
    start = {("t", p): 0 for p in range(4)}
    latest = {("t", p): 10 for p in range(4)}
    sizes = []
    while start != latest:
        end = rate_limit(start, latest, 15)
        sizes.append(sum(end[tp] - start[tp] for tp in end))
        start = end
    assert sizes == [12, 12, 12, 4]


def test_a_small_partition_is_not_starved() -> None:
    end = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10)
    assert end == {("t", 0): 9, ("t", 1): 1}


@given(
    backlog=st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 10**6),
                                                          st.integers(0, 5000)), min_size=1),
    limit=st.integers(1, 10_000),
)
def test_rate_limit_bounds(backlog: dict[int, tuple[int, int]], limit: int) -> None:
    start = {("t", p): s for p, (s, _) in backlog.items()}
    latest = {("t", p): s + n for p, (s, n) in backlog.items()}
    end = rate_limit(start, latest, limit)
    assert set(end) == set(latest)
    for tp in end:
        assert start[tp] <= end[tp] <= latest[tp]
        if latest[tp] > start[tp]:
            assert end[tp] > start[tp]  # progress on every partition with a backlog
    taken = sum(end[tp] - start[tp] for tp in end)
    # never more than the limit, but for the one record each starved partition gets
    assert taken <= limit + len(end)


@given(sizes=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
       wanted=st.one_of(st.none(), st.integers(1, 64)))
def test_split_covers_each_offset_once(sizes: list[int], wanted: int | None) -> None:
    ranges = [Range("t", p, 100 * p, 100 * p + n) for p, n in enumerate(sizes)]
    pieces = split(ranges, wanted)
    for r in ranges:
        mine = sorted((x.start, x.end) for x in pieces if x.partition == r.partition)
        covered = [o for a, b in mine for o in range(a, b)]
        assert covered == list(range(r.start, r.end))
    total = sum(sizes)
    if wanted:
        assert len(pieces) >= min(wanted, total)
    assert all(p.size > 0 for p in pieces)

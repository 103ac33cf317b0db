"""Properties of KIP-848's server-side assignors (odradek.coordinator.consumer.assignors).

* both: complete (every partition of a subscribed topic goes to exactly one of
  its subscribers, nothing else is assigned) and deterministic (the same
  input, in any order, gives the same assignment), whatever the previous
  assignment (even one naming unknown topics, partitions or members);
* uniform: members with the same subscription are within one partition of
  each other; sticky (a member that stays keeps at least min(what it had, the
  quota) of its partitions when another joins); a fixpoint (its own answer as
  the previous one gives the same answer);
* range: for each topic, its subscribers in member id order take contiguous
  ranges, the larger ones first, so members with the same subscription get
  the same partition numbers of topics with the same partition count.

Derandomized by the suite's Hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import TypeVar

from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.consumer.assignors import range_assignor, uniform
from odradek.coordinator.consumer.model import Assignment, pairs

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]
MEMBERS = [f"m{i}" for i in range(6)]

Subs = dict[str, frozenset[uuid.UUID]]
K = TypeVar("K")
V = TypeVar("V")


@st.composite
def worlds(draw: st.DrawFn, same_subscription: bool = False) -> tuple[Subs, dict[uuid.UUID, int]]:
    topics = {t: draw(st.integers(1, 12))
              for t in draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))}
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, unique=True))
    # Sometimes a member subscribes to a topic that does not exist (yet).
    names = [*topics, TOPICS[-1]] if TOPICS[-1] not in topics else list(topics)
    if same_subscription:
        sub = frozenset(draw(st.lists(st.sampled_from(list(topics)), min_size=1, unique=True)))
        return dict.fromkeys(members, sub), topics
    return {m: frozenset(draw(st.lists(st.sampled_from(names), unique=True)))
            for m in members}, topics


@st.composite
def previous(draw: st.DrawFn) -> dict[str, Assignment]:
    """Anything: overlapping, out of range, unknown topics and members."""
    out: dict[str, Assignment] = {}
    for m in draw(st.lists(st.sampled_from(MEMBERS), unique=True)):
        a = {t: frozenset(draw(st.lists(st.integers(0, 14), min_size=1)))
             for t in draw(st.lists(st.sampled_from(TOPICS), unique=True))}
        out[m] = a
    return out


def assert_complete(subs: Subs, topics: Mapping[uuid.UUID, int],
                    result: Mapping[str, Assignment]) -> None:
    assert set(result) == set(subs)
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m, a in result.items():
        for t, p in pairs(a):
            assert (t, p) not in seen, f"{(t, p)} to {seen[(t, p)]} and {m}"
            assert t in subs[m] and t in topics and 0 <= p < topics[t], (m, t, p)
            seen[(t, p)] = m
        assert all(ps for ps in a.values()), "an empty set in an assignment"
    wanted = {(t, p) for t, n in topics.items() if any(t in s for s in subs.values())
              for p in range(n)}
    assert set(seen) == wanted


def size(a: Assignment) -> int:
    return sum(len(ps) for ps in a.values())


@given(worlds(), previous())
def test_uniform_is_complete(world: tuple[Subs, dict[uuid.UUID, int]],
                             prev: dict[str, Assignment]) -> None:
    subs, topics = world
    assert_complete(subs, topics, uniform(subs, topics, prev))


@given(worlds(), previous())
def test_range_is_complete(world: tuple[Subs, dict[uuid.UUID, int]],
                           prev: dict[str, Assignment]) -> None:
    subs, topics = world
    assert_complete(subs, topics, range_assignor(subs, topics, prev))


@given(worlds(), previous(), st.randoms(use_true_random=False))
def test_assignors_are_deterministic_whatever_the_order(
        world: tuple[Subs, dict[uuid.UUID, int]], prev: dict[str, Assignment],
        rnd: random.Random) -> None:
    subs, topics = world

    def shuffled(d: dict[K, V]) -> dict[K, V]:
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    for assign in (uniform, range_assignor):
        first = assign(subs, topics, prev)
        again = assign(shuffled(subs), shuffled(topics), shuffled(prev))
        assert again == first, assign.__name__


@given(worlds(), previous())
def test_uniform_balances_members_with_the_same_subscription(
        world: tuple[Subs, dict[uuid.UUID, int]], prev: dict[str, Assignment]) -> None:
    subs, topics = world
    # Also from the most skewed start: one member had every partition.
    skewed = {min(subs): {t: frozenset(range(n)) for t, n in topics.items()}}
    for start in (prev, skewed):
        result = uniform(subs, topics, start)
        by_sub: dict[frozenset[uuid.UUID], list[int]] = {}
        for m, s in subs.items():
            by_sub.setdefault(s & set(topics), []).append(size(result[m]))
        for s, sizes in by_sub.items():
            assert max(sizes) - min(sizes) <= 1, (sorted(map(str, s)), sizes)


@given(worlds(same_subscription=True), st.sampled_from(MEMBERS))
def test_uniform_is_sticky_when_a_member_joins(
        world: tuple[Subs, dict[uuid.UUID, int]], joiner: str) -> None:
    subs, topics = world
    if joiner in subs:
        return
    before = uniform(subs, topics, {})
    after_subs = {**subs, joiner: next(iter(subs.values()))}
    after = uniform(after_subs, topics, before)
    total = sum(size(a) for a in before.values())
    quota = total // len(after_subs)
    for m, had in before.items():
        kept = sum(len(ps & after[m].get(t, frozenset())) for t, ps in had.items())
        assert kept >= min(size(had), quota), (m, size(had), kept, quota)


@given(worlds(), previous())
def test_uniform_is_a_fixpoint(world: tuple[Subs, dict[uuid.UUID, int]],
                               prev: dict[str, Assignment]) -> None:
    subs, topics = world
    first = uniform(subs, topics, prev)
    assert uniform(subs, topics, first) == first


@given(worlds())
def test_range_gives_contiguous_ranges_in_member_order(
        world: tuple[Subs, dict[uuid.UUID, int]]) -> None:
    subs, topics = world
    result = range_assignor(subs, topics, {})
    for t, n in topics.items():
        who = sorted(m for m in subs if t in subs[m])
        got = [sorted(result[m].get(t, ())) for m in who]
        flat = [p for ps in got for p in ps]
        assert flat == list(range(n if who else 0)), (t, got)
        sizes = [len(ps) for ps in got]
        assert sizes == sorted(sizes, reverse=True) and (
            not sizes or max(sizes) - min(sizes) <= 1), sizes


@given(worlds(same_subscription=True), st.integers(1, 12))
def test_range_gives_co_partitioned_topics_the_same_numbers(
        world: tuple[Subs, dict[uuid.UUID, int]], n: int) -> None:
    subs, topics = world
    topics = dict.fromkeys(topics, n)
    result = range_assignor(subs, topics, {})
    for m, a in result.items():
        parts = {a.get(t, frozenset()) for t in subs[m]}
        assert len(parts) == 1, (m, a)

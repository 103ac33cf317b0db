"""Server-side assignors of KIP-848 (``group.consumer.assignors``; a member asks
for one by name with ``group.remote.assignor``).

An assignor maps the members' subscriptions (topic ids) and the subscribed
topics' partition counts to a target assignment. Both are deterministic (the
same input gives the same assignment), so replaying a group gives it back.

* ``uniform`` (Kafka's default): every partition of a subscribed topic goes to
  one subscribed member; partitions a member had in the previous target stay
  with it while it keeps them within balance (sticky); members subscribed to
  the same topics end up within one partition of each other.
* ``range``: for each topic, its subscribed members in member id order take
  contiguous ranges, the first ``partitions % members`` one more (members with
  the same subscriptions get the same partition numbers of co-partitioned
  topics).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from odradek.coordinator.consumer.model import Assignment

Subscriptions = Mapping[str, frozenset[uuid.UUID]]
Assignor = Callable[[Subscriptions, Mapping[uuid.UUID, int], Mapping[str, Assignment]],
                    dict[str, Assignment]]


def _freeze(work: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in work.items()}


def uniform(
    subs: Subscriptions, topics: Mapping[uuid.UUID, int], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    members = sorted(subs)
    work: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    eligible = {t: [m for m in members if t in subs[m]] for t in sorted(topics, key=str)}
    owner: dict[tuple[uuid.UUID, int], str] = {}

    def give(m: str, t: uuid.UUID, p: int) -> None:
        work[m].setdefault(t, set()).add(p)
        count[m] += 1
        owner[(t, p)] = m

    def take(m: str, t: uuid.UUID, p: int) -> None:
        work[m][t].discard(p)
        count[m] -= 1
        del owner[(t, p)]

    # 1. Stickiness: keep what each member had, while it still subscribes.
    for m in members:
        for t, ps in sorted(previous.get(m, {}).items(), key=lambda kv: str(kv[0])):
            if t in subs[m] and t in topics:
                for p in sorted(ps):
                    if p < topics[t] and (t, p) not in owner:
                        give(m, t, p)
    # 2. Every other partition to its least loaded subscribed member.
    for t, who in eligible.items():
        if not who:
            continue
        for p in range(topics[t]):
            if (t, p) not in owner:
                give(min(who, key=lambda m: (count[m], m)), t, p)
    # 3. Balance: move partitions from a member to a subscribed one two or more behind.
    moved = True
    while moved:
        moved = False
        for (t, p), m in sorted(owner.items(), key=lambda kv: (-count[kv[1]], str(kv[0][0]),
                                                                 kv[0][1])):
            target = min(eligible[t], key=lambda x: (count[x], x))
            if count[m] - count[target] >= 2:
                take(m, t, p)
                give(target, t, p)
                moved = True
                break
    return _freeze(work)


def range_assignor(
    subs: Subscriptions, topics: Mapping[uuid.UUID, int], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    work: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subs}
    for t in sorted(topics, key=str):
        who = sorted(m for m in subs if t in subs[m])
        if not who:
            continue
        n = topics[t]
        per, extra = divmod(n, len(who))
        start = 0
        for i, m in enumerate(who):
            size = per + (1 if i < extra else 0)
            if size:
                work[m][t] = set(range(start, start + size))
            start += size
    return _freeze(work)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
"""By the names clients use; Kafka's class names map to these (:func:`assignor_name`)."""

_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_name(configured: str) -> str:
    """``uniform`` for Kafka's class name of the uniform assignor, etc."""
    name = configured.strip()
    return _CLASS_NAMES.get(name, name)

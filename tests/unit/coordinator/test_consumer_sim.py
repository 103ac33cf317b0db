"""KIP-848 consumer groups under the seeded simulation
(tests/support/consumer_sim.py): the pure coordinator with 2-6 simulated
clients, lost and delayed answers, late acks, silent clients, topic changes
and crashes replayed from the log; invariants after every event, and the group
settles (Stable, every partition owned once, balanced) once the faults stop.

``CONSUMER_SIM_SEEDS=500`` runs more seeds locally; a seed that fails becomes
an explicit case here.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.support.consumer_sim import run

SEEDS = range(int(os.environ.get("CONSUMER_SIM_SEEDS", "40")))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_partition_is_owned_twice_and_the_group_settles(seed: int) -> None:
    sim = run(seed)
    assert sim.counts.get("hb", 0) > 100, f"seed {seed}: too few heartbeats {sim.counts}"


def test_the_seeds_exercise_every_fault() -> None:
    totals: Counter[str] = Counter()
    for seed in range(10):
        totals.update(run(seed).counts)
    for kind in ("crash", "crash-before-append", "COORDINATOR_LOAD_IN_PROGRESS", "timeout",
                 "late-ack", "silent", "poll", "zombie", "leave", "subscribe", "topic",
                 "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS", "UNKNOWN_MEMBER_ID",
                 "FENCED_MEMBER_EPOCH", "UNRELEASED_INSTANCE_ID"):
        assert totals[kind], f"no {kind} in seeds 0-9: {dict(totals)}"


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "a late duplicate of an older request (the client timed out on it and moved on) is "
    "taken as a retry, as by Kafka's coordinator: clients keep one heartbeat in flight "
    "per connection, so this is outside the model"))
@pytest.mark.parametrize("seed", [57, 66])
def test_late_duplicates_of_old_requests_are_outside_the_model(seed: int) -> None:
    run(seed, stale_requests=True)

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
from tests.support.consumer_sim_classic import run as run_upgrade

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


# -- classic clients and the online upgrade (tests/support/consumer_sim_classic.py) ------

UPGRADE_SEEDS = range(int(os.environ.get("CONSUMER_SIM_UPGRADE_SEEDS", "30")))


@pytest.mark.parametrize("seed", UPGRADE_SEEDS)
def test_classic_clients_upgraded_online_own_no_partition_twice_and_settle(seed: int) -> None:
    sim = run_upgrade(seed)
    assert sim.counts.get("hb", 0) > 100, f"seed {seed}: too few heartbeats {sim.counts}"


@pytest.mark.parametrize("seed", [
    4,  # a cooperative rejoin changed only the owned partitions in the classic
        # metadata and wrote no member record: replay rebuilt the old metadata
    8, 19,  # a classic member removed by its session timeout came back with its
            # old member id and was re-admitted while still owning partitions
            # given to others (now UNKNOWN_MEMBER_ID, as in a classic group)
    35, 76,  # replaying an upgrade kept the classic leader id: the group, classic
             # again, waited in CompletingRebalance for a leader that was not a member
])
def test_classic_bridge_bugs_found_by_the_simulation(seed: int) -> None:
    run_upgrade(seed)


def test_the_upgrade_seeds_exercise_every_path() -> None:
    totals: Counter[str] = Counter()
    for seed in range(12):
        totals.update(run_upgrade(seed).counts)
    for kind in ("join-MEMBER_ID_REQUIRED", "join-NONE", "join-UNKNOWN_MEMBER_ID",
                 "sync-NONE", "sync-ILLEGAL_GENERATION", "sync-REBALANCE_IN_PROGRESS",
                 "hb-REBALANCE_IN_PROGRESS", "hb-UNKNOWN_MEMBER_ID", "eager-revoke",
                 "cooperative-revoke", "withheld", "commit-NONE", "zombie", "crash",
                 "crash-before-append", "ctimeout", "silent", "leave", "topic",
                 "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS", "GROUP_ID_NOT_FOUND",
                 "downgrade"):
        assert totals[kind], f"no {kind} in upgrade seeds 0-11: {dict(totals)}"

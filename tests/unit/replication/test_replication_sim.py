"""The partition state machine under the seeded replication simulation
(tests/support/replication_sim.py): three replicas, a controller electing leaders
and deciding ISR changes, a lossy network, crashes, fencing, DeleteRecords, and the
invariants checked after every event.

``REPLICATION_SIM_SEEDS=1000`` runs more seeds locally; a failure names its seed,
and ``python -m tests.support.replication_sim SEED`` replays it with the whole
trace. A seed that found a bug becomes an explicit case below.
"""

from __future__ import annotations

import os

import pytest

from tests.support.replication_sim import STEPS, ReplicationSim

SEEDS = range(int(os.environ.get("REPLICATION_SIM_SEEDS", "60")))

FOUND_BUGS = {
    # read_for_follower answered "diverging at epoch -1" (read as no divergence) to a
    # follower whose last epoch is older than every epoch in the leader's log: it took
    # the HW over records never committed.
    62: "older-epoch",
    # truncate_to kept an epoch with no records at the log end (a leadership that
    # appended nothing): the follower named it in every fetch, never catching up.
    79: "empty-epoch",
    # append_as_follower could not append a fetch made from inside a leader's batch
    # (DeleteRecords had moved the leader's log start into it).
    60: "inside-a-batch",
    # propose_isr added a replica on a log end it fetched before it restarted (with
    # ReplicationSim(63, broker_epochs=False) it still does).
    63: "stale-log-end",
}


def run(seed: int) -> ReplicationSim:
    sim = ReplicationSim(seed)
    sim.run(STEPS)
    sim.heal()
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_replicated_partition_keeps_its_invariants(seed: int) -> None:
    sim = run(seed)
    assert sim.committed.end > 0, f"seed {seed}: nothing was committed"
    assert sim.controller.leader_epoch > 1, f"seed {seed}: the leader never changed"


@pytest.mark.parametrize("seed", sorted(FOUND_BUGS), ids=lambda s: f"{s}-{FOUND_BUGS[s]}")
def test_seeds_that_found_bugs(seed: int) -> None:
    run(seed)


def test_the_faults_happen() -> None:
    """In two seeds, every kind of event the invariants are meant to survive (some, like
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, are rare: about one run in six has one)."""
    stats: dict[str, int] = {}
    for seed in (7, 8):
        for what, n in run(seed).stats.items():
            stats[what] = stats.get(what, 0) + n
    for what in ("crashes", "fences", "leader moves", "diverging", "offset out of range",
                 "delete records", "isr proposals", "acked", "not enough replicas",
                 "not enough replicas after append"):
        assert stats.get(what, 0) > 0, f"no {what} in seeds 7 and 8: {stats}"

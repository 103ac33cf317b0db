"""The Raft core under the seeded simulation (tests/support/raft_sim.py).

Each seed runs a quorum through message loss, duplication, delay and
reordering, network partitions (split, isolation, one-way), crashes that lose
unflushed data, restarts and snapshots, checking the safety invariants after
every event, then heals everything and checks liveness. ``RAFT_SIM_SEEDS``
multiplies the number of seeds (e.g. 10 for a long local run); a failure names
its seed and the command that replays it.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from odradek.raft.voters import VOTERS_TAG
from tests.support.raft_sim import Faults, RaftSim

SCALE = float(os.environ.get("RAFT_SIM_SEEDS", "1"))
CHUNK = 50


def _run(first: int, count: int, voters: int, observers: int, faults: Faults | None = None,
         chaos_ms: int = 8_000) -> int:
    committed = 0
    for seed in range(first, first + count):
        copy = dataclasses.replace(faults) if faults else None
        sim = RaftSim(seed, voters, observers, faults=copy)
        sim.run(chaos_ms=chaos_ms)
        committed += sim.committed_end
    return committed


@pytest.mark.parametrize("chunk", range(int(1500 * SCALE) // CHUNK))
def test_three_voters(chunk: int) -> None:
    assert _run(chunk * CHUNK, CHUNK, voters=3, observers=0) > 0


@pytest.mark.parametrize("chunk", range(int(300 * SCALE) // CHUNK))
def test_five_voters(chunk: int) -> None:
    assert _run(100_000 + chunk * CHUNK, CHUNK, voters=5, observers=0) > 0


@pytest.mark.parametrize("chunk", range(int(200 * SCALE) // CHUNK))
def test_three_voters_two_observers(chunk: int) -> None:
    assert _run(200_000 + chunk * CHUNK, CHUNK, voters=3, observers=2) > 0


@pytest.mark.parametrize("chunk", range(int(200 * SCALE) // CHUNK))
def test_hostile_network(chunk: int) -> None:
    """A fifth of messages lost, many duplicated, long delays, frequent faults."""
    hostile = Faults(loss=0.2, dup=0.1, max_delay_ms=300, crash_every_ms=1500,
                     partition_every_ms=1500, snapshot_every_ms=1000)
    assert _run(300_000 + chunk * CHUNK, CHUNK, voters=3, observers=1, faults=hostile) > 0


@pytest.mark.parametrize("chunk", range(int(300 * SCALE) // CHUNK))
def test_dynamic_voters(chunk: int) -> None:
    """KIP-853: three bootstrap voters and two spare controllers; the leader adds
    and removes voters (itself too) under the same faults, and restarted
    controllers come back on new ports and update their endpoints
    (UpdateRaftVoter): every run settles with each voter's current endpoint in
    the voter set."""
    committed, changes, moved, updates = 0, 0, 0, 0
    for seed in range(400_000 + chunk * CHUNK, 400_000 + (chunk + 1) * CHUNK):
        sim = RaftSim(seed, 3, 0, dynamic=True, spare=2)
        sim.run(chaos_ms=8_000)
        committed += sim.committed_end
        changes += sim.reconfigs
        moved += sim.readdresses
        updates += sim.endpoint_updates()
    assert committed > 0 and changes > 0 and moved > 0 and updates > 0


@pytest.mark.parametrize("chunk", range(int(100 * SCALE) // CHUNK))
def test_dynamic_voters_hostile_network(chunk: int) -> None:
    """Voter changes on the hostile network: lost, duplicated and late messages,
    frequent crashes (some restarting on a new port), partitions and snapshots,
    a change every half second."""
    changes, updates = 0, 0
    for seed in range(500_000 + chunk * CHUNK, 500_000 + (chunk + 1) * CHUNK):
        hostile = Faults(loss=0.2, dup=0.1, max_delay_ms=300, crash_every_ms=1500,
                         partition_every_ms=1500, snapshot_every_ms=1000,
                         reconfig_every_ms=500)
        sim = RaftSim(seed, 3, 0, faults=hostile, dynamic=True, spare=2)
        sim.run(chaos_ms=8_000)
        changes += sim.reconfigs
        updates += sim.endpoint_updates()
    assert changes > 0 and updates > 0


@pytest.mark.parametrize("chunk", range(int(200 * SCALE) // CHUNK))
def test_static_voters_upgraded_to_dynamic(chunk: int) -> None:
    """kraft.version 0 -> 1: a static quorum (each node knowing its directory id)
    is upgraded by its leader under the usual faults, then voters are added,
    removed and readdressed; the runs that upgraded end with every node at 1."""
    upgraded, changes = 0, 0
    for seed in range(600_000 + chunk * CHUNK, 600_000 + (chunk + 1) * CHUNK):
        sim = RaftSim(seed, 3, 0, spare=1, static_first=True)
        sim.run(chaos_ms=8_000)
        changes += sim.reconfigs
        kraft = {n.raft.kraft_version for n in sim.nodes.values() if n.raft is not None}
        if any(r.startswith(VOTERS_TAG) for e in sim.committed.values() for r in e[2]):
            upgraded += 1  # committed (an upgrade appended may be lost with its leader)
            assert kraft == {1}, f"seed {seed}: kraft.version {kraft} after the upgrade"
    assert upgraded > CHUNK // 2 and changes > 0

"""kraft.version 0 -> 1 in the Raft core: a static quorum's leader writes its
voters, with their directory ids and endpoints, as a VotersRecord; one rule per
test, on a quiet network. The chaos runs are
``test_static_voters_upgraded_to_dynamic`` in test_raft_sim.py."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.raft.membership import VoterChangeError
from odradek.raft.node import NotLeaderError, RaftNode
from odradek.raft.voters import KRAFT_VERSION_TAG, VOTERS_TAG, Endpoint, Voter
from odradek.wire.errors import ErrorCode
from tests.support.raft_sim import RaftSim
from tests.unit.raft.test_voter_changes import QUIET, leader_of, run


def static_sim(*, directories: bool = True) -> RaftSim:
    return RaftSim(7, 3, 0, faults=dataclasses.replace(QUIET), spare=1,
                   static_first=directories)


def ends(sim: RaftSim, raft: RaftNode) -> dict[int, tuple[Endpoint, ...]]:
    return {i: sim.nodes[i].endpoints for i in raft.voters}


def refusal(sim: RaftSim, raft: RaftNode, version: int = 1,
            endpoints: dict[int, tuple[Endpoint, ...]] | None = None) -> int:
    with pytest.raises(VoterChangeError) as info:
        raft.upgrade_kraft_version(version, ends(sim, raft) if endpoints is None
                                   else endpoints, sim.now)
    return info.value.code


def test_the_leader_writes_the_static_voters_with_directories_and_endpoints() -> None:
    sim = static_sim()
    run(sim, 1_000)  # every voter has fetched (with its directory id)
    leader = leader_of(sim)
    assert leader.kraft_version == 0
    end = leader.upgrade_kraft_version(1, ends(sim, leader), sim.now)
    sim._after(sim.nodes[leader.node_id])
    entry = leader.log.entry_at(end - 1)
    assert entry is not None and entry.control
    assert entry.records[0].startswith(KRAFT_VERSION_TAG)
    assert entry.records[1].startswith(VOTERS_TAG)
    assert leader.voter_set.voters == tuple(
        Voter(i, sim.dirs[i], sim.nodes[i].endpoints) for i in (1, 2, 3))
    run(sim, 1_000)
    assert leader.high_watermark >= end
    assert {n.raft.kraft_version for n in sim.nodes.values() if n.raft} == {1}
    # Now a dynamic quorum: the spare controller can be added.
    spare = min(sim.spare_ids)
    leader = leader_of(sim)
    leader.add_voter(Voter(spare, sim.dirs[spare], sim.nodes[spare].endpoints), sim.now)
    sim._after(sim.nodes[leader.node_id])
    run(sim, 1_000)
    assert leader_of(sim).voters == frozenset({1, 2, 3, spare})


def test_the_same_level_writes_nothing_and_validate_only_writes_nothing() -> None:
    sim = static_sim()
    run(sim, 1_000)
    leader = leader_of(sim)
    end = leader.log.end_offset
    assert leader.upgrade_kraft_version(0, ends(sim, leader), sim.now) == -1
    assert leader.upgrade_kraft_version(1, ends(sim, leader), sim.now,
                                        validate_only=True) == -1
    assert leader.log.end_offset == end and leader.kraft_version == 0


def test_unknown_directories_or_endpoints_refuse_the_upgrade() -> None:
    sim = static_sim(directories=False)  # static nodes that know no directory id
    run(sim, 1_000)
    leader = leader_of(sim)
    assert refusal(sim, leader) == ErrorCode.INVALID_UPDATE_VERSION
    sim = static_sim()
    run(sim, 1_000)
    leader = leader_of(sim)
    missing = {i: e for i, e in ends(sim, leader).items() if i != leader.node_id}
    assert refusal(sim, leader, endpoints=missing) == ErrorCode.INVALID_UPDATE_VERSION
    assert leader.kraft_version == 0


def test_unsupported_levels_and_downgrades_are_refused() -> None:
    sim = static_sim()
    run(sim, 1_000)
    leader = leader_of(sim)
    assert refusal(sim, leader, version=2) == ErrorCode.INVALID_UPDATE_VERSION
    leader.upgrade_kraft_version(1, ends(sim, leader), sim.now)
    sim._after(sim.nodes[leader.node_id])
    assert refusal(sim, leader, version=0) == ErrorCode.INVALID_UPDATE_VERSION


def test_no_upgrade_before_the_leader_committed_in_its_epoch() -> None:
    sim = static_sim()
    run(sim, 1_000)
    leader = leader_of(sim)
    leader._leader_hw_known = False  # as just after its election
    assert refusal(sim, leader) == ErrorCode.REQUEST_TIMED_OUT


def test_only_the_leader_upgrades() -> None:
    sim = static_sim()
    leader = leader_of(sim)
    follower = next(n.raft for n in sim.nodes.values()
                    if n.raft is not None and n.raft is not leader and n.node_id in leader.voters)
    with pytest.raises(NotLeaderError):
        follower.upgrade_kraft_version(1, ends(sim, leader), sim.now)

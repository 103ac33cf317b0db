"""KIP-853 voter changes in the Raft core, one rule per test, on a quiet network.

The chaos runs with voter changes are ``test_dynamic_voters`` in test_raft_sim.py.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.raft.codec import decode_entries, encode_entries
from odradek.raft.log import Entry
from odradek.raft.membership import VoterChangeError
from odradek.raft.node import RaftNode, Role
from odradek.raft.voters import (
    VOTERS_TAG,
    Endpoint,
    Voter,
    VoterSet,
    decode_voters,
    encode_voters,
    frame_snapshot,
    kraft_version_record,
    unframe_snapshot,
    voters_record,
)
from odradek.wire.errors import ErrorCode
from tests.support.raft_sim import Faults, RaftSim

QUIET = Faults(loss=0.0, dup=0.0, max_delay_ms=5)


def dyn_sim(voters: int = 3, spare: int = 2, seed: int = 7) -> RaftSim:
    return RaftSim(seed, voters, 0, faults=QUIET, dynamic=True, spare=spare)


def leader_of(sim: RaftSim, within_ms: int = 10_000) -> RaftNode:
    deadline = sim.now + within_ms
    while sim.now < deadline:
        sim.run_until(sim.now + 50)
        leader = sim.leader()
        if leader is not None and leader.raft is not None and leader.raft.voter_change_pending(
        ) is False and leader.raft.leader_committed_in_epoch():
            return leader.raft
    raise AssertionError("no leader that committed in its epoch")


def run(sim: RaftSim, ms: int) -> None:
    sim.run_until(sim.now + ms)


def add(sim: RaftSim, node_id: int) -> int:
    raft = leader_of(sim)
    end = raft.add_voter(Voter(node_id, sim.dirs[node_id]), sim.now)
    sim._after(sim.nodes[raft.node_id])
    return end


def test_voters_record_round_trips_with_endpoints() -> None:
    vs = VoterSet.of([Voter(2, uuid.uuid4(), (Endpoint("CONTROLLER", "h2", 9093),)),
                      Voter(1, uuid.uuid4())])
    assert decode_voters(encode_voters(vs)) == vs
    assert [v.node_id for v in vs.voters] == [1, 2]
    framed = frame_snapshot(vs, b"payload")
    assert unframe_snapshot(framed) == (vs, b"payload")
    assert unframe_snapshot(b"old payload") == (None, b"old payload")


def test_control_records_keep_their_kind_on_disk() -> None:
    vs = VoterSet.of([Voter(1, uuid.uuid4())])
    entry = Entry(0, 1, (b"leader-change", kraft_version_record(1), voters_record(vs)),
                  control=True)
    assert decode_entries(encode_entries([entry])) == [entry]


def test_first_leader_writes_the_bootstrap_voter_set() -> None:
    sim = dyn_sim()
    raft = leader_of(sim)
    first = raft.log.entry_at(0)
    assert first is not None and first.control
    assert any(r.startswith(VOTERS_TAG) for r in first.records)
    assert raft.kraft_version == 1 and raft.voters == frozenset({1, 2, 3})
    run(sim, 1000)
    spare = sim.nodes[4].raft
    assert spare is not None and not spare.is_voter and spare.voters == frozenset({1, 2, 3})


def test_a_caught_up_observer_is_added_and_counts_at_once() -> None:
    sim = dyn_sim()
    run(sim, 3000)  # the spares fetch and catch up
    end = add(sim, 4)
    raft = leader_of(sim)
    assert raft.voters == frozenset({1, 2, 3, 4})  # in force once appended
    assert raft.leader_state is not None and raft.leader_state.voters == raft.voters
    run(sim, 1000)
    assert raft.high_watermark >= end
    node4 = sim.nodes[4].raft
    assert node4 is not None and node4.is_voter and node4.high_watermark >= end


def test_one_change_at_a_time() -> None:
    sim = dyn_sim()
    run(sim, 3000)
    add(sim, 4)
    leader = sim.leader()
    assert leader is not None and leader.raft is not None
    raft = leader.raft
    assert raft.voter_change_pending()
    with pytest.raises(VoterChangeError) as err:
        raft.add_voter(Voter(5, sim.dirs[5]), sim.now)
    assert err.value.code == ErrorCode.REQUEST_TIMED_OUT
    run(sim, 1000)
    assert not raft.voter_change_pending()
    raft.add_voter(Voter(5, sim.dirs[5]), sim.now)  # allowed once the first commits


def test_an_observer_that_does_not_fetch_or_has_another_directory_is_refused() -> None:
    sim = dyn_sim()
    raft = leader_of(sim)
    sim._on_crash(4)
    sim._queue = [e for e in sim._queue if e.kind != "restart"]
    with pytest.raises(VoterChangeError) as err:
        raft.add_voter(Voter(4, sim.dirs[4]), sim.now)
    assert err.value.code == ErrorCode.REQUEST_TIMED_OUT
    run(sim, 3000)
    with pytest.raises(VoterChangeError) as err:
        raft.add_voter(Voter(5, uuid.uuid4()), sim.now)  # 5 fetches with another directory
    assert err.value.code == ErrorCode.REQUEST_TIMED_OUT
    with pytest.raises(VoterChangeError) as err:
        raft.add_voter(Voter(2, sim.dirs[2]), sim.now)
    assert err.value.code == ErrorCode.DUPLICATE_VOTER


def test_remove_needs_the_right_directory_and_leaves_one_voter() -> None:
    sim = dyn_sim(voters=1, spare=0)
    raft = leader_of(sim)
    with pytest.raises(VoterChangeError) as err:
        raft.remove_voter(1, uuid.uuid4(), sim.now)
    assert err.value.code == ErrorCode.VOTER_NOT_FOUND
    with pytest.raises(VoterChangeError) as err:
        raft.remove_voter(1, sim.dirs[1], sim.now)
    assert err.value.code == ErrorCode.INVALID_REQUEST


def test_no_change_before_the_leader_committed_in_its_epoch() -> None:
    sim = dyn_sim()
    while True:
        run(sim, 5)
        leader = sim.leader()
        if leader is not None and leader.raft is not None:
            break
    assert not leader.raft.leader_committed_in_epoch()
    with pytest.raises(VoterChangeError) as err:
        leader.raft.remove_voter(2, sim.dirs[2], sim.now)
    assert err.value.code == ErrorCode.REQUEST_TIMED_OUT


def test_static_voters_cannot_change() -> None:
    sim = RaftSim(3, 3, 1, faults=QUIET)
    run(sim, 3000)
    leader = sim.leader()
    assert leader is not None and leader.raft is not None
    with pytest.raises(VoterChangeError) as err:
        leader.raft.remove_voter(2, uuid.UUID(int=0), sim.now)
    assert err.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_a_removed_leader_steps_down_once_the_removal_commits() -> None:
    sim = dyn_sim()
    raft = leader_of(sim)
    old = raft.node_id
    end = raft.remove_voter(old, sim.dirs[old], sim.now)
    sim._after(sim.nodes[old])
    assert raft.role is Role.LEADER and not raft.is_voter  # leads a set it is not in
    run(sim, 6000)
    new = leader_of(sim)
    assert new.node_id != old and old not in new.voters and new.high_watermark >= end
    removed = sim.nodes[old].raft
    assert removed is not None and removed.role is Role.FOLLOWER and not removed.is_voter
    assert removed.leader_id == new.node_id  # it follows on as an observer


def test_the_voter_set_survives_a_snapshot_and_restart() -> None:
    sim = dyn_sim()
    run(sim, 3000)
    add(sim, 4)
    run(sim, 1000)
    node = sim.nodes[2]
    assert node.raft is not None and 4 in node.raft.voters
    sim._on_snapshot(2)
    assert node.log.start_offset > 0
    sim._on_crash(2)
    sim._on_restart(2)
    assert node.raft is not None and node.raft.voters == frozenset({1, 2, 3, 4})

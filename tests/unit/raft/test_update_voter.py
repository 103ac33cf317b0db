"""KIP-853 UpdateRaftVoter in the Raft core: a voter's new endpoints reach the
voter set, one rule (and one error code) per test, on a quiet network.

The chaos runs with restarts on new ports are ``test_dynamic_voters`` in
test_raft_sim.py.
"""

from __future__ import annotations

import dataclasses
import uuid

from odradek.raft.messages import UpdateVoterRequest, UpdateVoterResponse
from odradek.raft.node import RaftNode, Role
from odradek.raft.voters import (
    NO_DIRECTORY,
    VOTERS_TAG,
    Endpoint,
    Voter,
    VoterSet,
    decode_voters,
    encode_voters,
)
from odradek.wire.errors import ErrorCode
from tests.support.raft_sim import Faults, RaftSim, SimNode
from tests.unit.raft.test_voter_changes import QUIET, add, leader_of, run


def dyn_sim(seed: int = 7) -> RaftSim:
    return RaftSim(seed, 3, 0, faults=dataclasses.replace(QUIET), dynamic=True, spare=2)


def ep(node_id: int, port: int, name: str = "CONTROLLER") -> tuple[Endpoint, ...]:
    return (Endpoint(name, f"n{node_id}", port),)


def ask(sim: RaftSim, target: RaftNode, req: UpdateVoterRequest) -> int:
    """Hand ``req`` to ``target``; the error code of its answer."""
    target.handle(req, sim.now)
    answers = [m for m in target.outbox if isinstance(m, UpdateVoterResponse)]
    assert len(answers) == 1 and answers[0].dst == req.src
    target.outbox.remove(answers[0])
    sim._after(sim.nodes[target.node_id])
    return answers[0].error


def follower_of(sim: RaftSim, leader: RaftNode) -> SimNode:
    return next(n for n in sim.nodes.values()
                if n.node_id in leader.voters and n.node_id != leader.node_id)


def update(sim: RaftSim, leader: RaftNode, node_id: int, port: int, **kw: object) -> int:
    fields: dict[str, object] = {"directory_id": sim.dirs[node_id],
                                 "endpoints": ep(node_id, port)}
    fields.update(kw)
    return ask(sim, leader, UpdateVoterRequest(node_id, leader.node_id, leader.epoch,
                                               **fields))  # type: ignore[arg-type]


def voters_records(raft: RaftNode) -> list[VoterSet]:
    return [decode_voters(r[len(VOTERS_TAG):]) for e in raft.log.entries() if e.control
            for r in e.records if r.startswith(VOTERS_TAG)]


def test_the_kraft_version_range_round_trips_in_the_voters_record() -> None:
    vs = VoterSet.of([Voter(1, uuid.uuid4(), ep(1, 9093), (1, 1)), Voter(2, uuid.uuid4())])
    assert decode_voters(encode_voters(vs)) == vs
    assert decode_voters(encode_voters(vs)).get(2).kraft_versions == (0, 1)  # type: ignore[union-attr]


def test_a_voter_restarted_on_a_new_port_updates_its_endpoints() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    node = follower_of(sim, leader)
    before = len(voters_records(leader))
    sim._on_crash(node.node_id)
    node.port = 9100
    sim._start(node)
    run(sim, 3_000)
    leader = leader_of(sim)
    assert leader.voter_set.get(node.node_id) == Voter(node.node_id, sim.dirs[node.node_id],
                                                       ep(node.node_id, 9100))
    assert not leader.voter_change_pending()  # committed
    records = voters_records(leader)
    assert len(records) == before + 1 and records[-1].ids == records[-2].ids
    assert sim.endpoint_updates() == 1


def test_the_follower_asks_once_per_epoch_and_retries_a_refusal() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    node = follower_of(sim, leader)
    raft = node.raft
    assert raft is not None and raft.role is Role.FOLLOWER
    raft.endpoints = ep(node.node_id, 9200)
    raft._maybe_send_update(sim.now)
    sent = [m for m in raft.outbox if isinstance(m, UpdateVoterRequest)]
    assert [(m.dst, m.epoch, m.endpoints) for m in sent] == [
        (leader.node_id, leader.epoch, ep(node.node_id, 9200))]
    raft._maybe_send_update(sim.now)  # one in flight: not again
    assert len([m for m in raft.outbox if isinstance(m, UpdateVoterRequest)]) == 1
    raft.outbox.clear()
    refusal = UpdateVoterResponse(leader.node_id, node.node_id, leader.epoch, leader.node_id,
                                  ErrorCode.REQUEST_TIMED_OUT)
    raft.handle(refusal, sim.now)
    raft._maybe_send_update(sim.now)  # backing off
    assert not any(isinstance(m, UpdateVoterRequest) for m in raft.outbox)
    later = sim.now + raft.config.request_timeout_ms
    raft._maybe_send_update(later)
    assert any(isinstance(m, UpdateVoterRequest) for m in raft.outbox)
    raft.outbox.clear()
    raft.handle(dataclasses.replace(refusal, error=0), later)
    raft._maybe_send_update(later + raft.config.request_timeout_ms)  # accepted this epoch
    assert not any(isinstance(m, UpdateVoterRequest) for m in raft.outbox)


def test_an_update_that_changes_nothing_writes_nothing() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    end = leader.log.end_offset
    assert update(sim, leader, follower_of(sim, leader).node_id, 9000) == 0
    assert leader.log.end_offset == end


def test_only_the_leader_of_the_epoch_answers() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    node = follower_of(sim, leader)
    assert node.raft is not None
    req = UpdateVoterRequest(node.node_id, node.node_id, leader.epoch, sim.dirs[node.node_id],
                             ep(node.node_id, 9300))
    assert ask(sim, node.raft, req) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    old = dataclasses.replace(req, dst=leader.node_id, epoch=leader.epoch - 1)
    assert ask(sim, leader, old) == ErrorCode.FENCED_LEADER_EPOCH
    new = dataclasses.replace(old, epoch=leader.epoch + 1)
    assert ask(sim, leader, new) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_bad_requests_are_invalid() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    n = follower_of(sim, leader).node_id
    end = leader.log.end_offset
    assert update(sim, leader, n, 9300, directory_id=NO_DIRECTORY) == ErrorCode.INVALID_REQUEST
    assert update(sim, leader, n, 9300, endpoints=()) == ErrorCode.INVALID_REQUEST
    assert update(sim, leader, n, 9300, endpoints=ep(n, 9300, "OTHER")) == (
        ErrorCode.INVALID_REQUEST)  # lacks the controller listener
    assert update(sim, leader, n, 9300, kraft_versions=(0, 0)) == ErrorCode.INVALID_REQUEST
    assert leader.log.end_offset == end


def test_an_unknown_voter_is_not_found() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    spare = min(sim.spare_ids)
    assert update(sim, leader, spare, 9300) == ErrorCode.VOTER_NOT_FOUND
    n = follower_of(sim, leader).node_id
    assert update(sim, leader, n, 9300, directory_id=uuid.uuid4()) == ErrorCode.VOTER_NOT_FOUND


def test_an_update_waits_for_the_pending_change_to_commit() -> None:
    sim = dyn_sim()
    run(sim, 3_000)  # the spares catch up as observers
    leader = leader_of(sim)
    add(sim, min(sim.spare_ids))
    n = follower_of(sim, leader).node_id
    assert leader.voter_change_pending()
    assert update(sim, leader, n, 9300) == ErrorCode.REQUEST_TIMED_OUT
    run(sim, 1_000)
    assert not leader.voter_change_pending()
    assert update(sim, leader, n, 9300) == 0
    assert leader.voter_set.get(n).endpoints == ep(n, 9300)  # type: ignore[union-attr]


def test_no_update_before_the_leader_committed_in_its_epoch() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    leader._leader_hw_known = False  # as just after its election
    n = follower_of(sim, leader).node_id
    assert update(sim, leader, n, 9300) == ErrorCode.REQUEST_TIMED_OUT


def test_static_voters_cannot_be_updated() -> None:
    sim = RaftSim(7, 3, 0, faults=Faults(loss=0.0, dup=0.0, max_delay_ms=5))
    leader = leader_of(sim)
    n = next(v for v in sorted(leader.voters) if v != leader.node_id)
    assert update(sim, leader, n, 9300, directory_id=uuid.uuid4()) == (
        ErrorCode.UNSUPPORTED_VERSION)


def test_a_leader_with_a_stale_record_updates_its_own() -> None:
    sim = dyn_sim()
    leader = leader_of(sim)
    leader.endpoints = ep(leader.node_id, 9400)
    run(sim, 2_000)
    assert leader.role is Role.LEADER
    assert leader.voter_set.get(leader.node_id).endpoints == ep(leader.node_id, 9400)  # type: ignore[union-attr]
    assert not leader.voter_change_pending()

"""Scenarios of the Raft core, each on a quiet simulated network (no random faults).

The seeded chaos runs are in test_raft_sim.py; these pin down single rules:
pre-vote, check-quorum, graceful hand-over, persisted votes, divergence,
snapshots, stale and unknown senders.
"""

from __future__ import annotations

import random

import pytest

from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from odradek.raft.node import RaftConfig, RaftFatalError, RaftNode, Role
from odradek.raft.quorum_state import ElectionState, MemoryQuorumStateStore
from odradek.wire.errors import ErrorCode
from tests.support.raft_sim import SIM_CONFIG, Faults, RaftSim

QUIET = Faults(loss=0.0, dup=0.0, max_delay_ms=5)


def quiet_sim(seed: int = 1, voters: int = 3, observers: int = 0) -> RaftSim:
    return RaftSim(seed, voters, observers, faults=QUIET)


def elect(sim: RaftSim, within_ms: int = 10_000) -> int:
    deadline = sim.now + within_ms
    while sim.now < deadline:
        sim.run_until(sim.now + 50)
        leader = sim.leader()
        if leader is not None and leader.raft is not None and leader.raft.high_watermark > 0:
            return leader.node_id
    raise AssertionError("no leader elected")


def propose(sim: RaftSim, value: bytes) -> int:
    leader = sim.leader()
    assert leader is not None and leader.raft is not None
    end = leader.raft.propose([value], sim.now)
    sim._after(leader)
    return end


def wait_committed(sim: RaftSim, offset: int, nodes: list[int], within_ms: int = 5_000) -> None:
    deadline = sim.now + within_ms
    while sim.now < deadline:
        sim.run_until(sim.now + 20)
        if all((r := sim.nodes[n].raft) is not None and r.high_watermark >= offset
               for n in nodes):
            return
    raise AssertionError(f"offset {offset} not committed on {nodes}")


def test_three_voters_elect_one_leader_and_commit_on_all() -> None:
    sim = quiet_sim()
    leader = elect(sim)
    roles = sorted(n.raft.role.value for n in sim.nodes.values() if n.raft)
    assert roles == ["Follower", "Follower", "Leader"]
    end = propose(sim, b"hello")
    wait_committed(sim, end, [1, 2, 3])
    for node in sim.nodes.values():
        entry = node.log.entry_at(end - 1)
        assert entry is not None and entry.records == (b"hello",)
        assert node.raft is not None and node.raft.leader_id == leader
    assert sim.nodes[leader].log.entry_at(0) == Entry(0, 1, (b"leader-change",), control=True)


def test_a_rejoining_isolated_voter_does_not_disrupt_the_leader() -> None:
    """KIP-996: pre-votes are refused while followers hear from their leader, so
    the epoch stays where it is (without pre-vote the isolated node would have
    bumped it on every timeout and forced an election when it came back)."""
    sim = quiet_sim()
    leader = elect(sim)
    lone = next(n for n in sim.nodes if n != leader)
    epoch = sim.nodes[leader].raft.epoch  # type: ignore[union-attr]
    sim.groups = [frozenset([lone]), frozenset(sim.nodes) - {lone}]
    sim.run_until(sim.now + 10_000)
    lone_raft = sim.nodes[lone].raft
    assert lone_raft is not None and lone_raft.epoch == epoch  # pre-votes never bump it
    sim.groups = None
    sim.run_until(sim.now + 5_000)
    raft = sim.nodes[leader].raft
    assert raft is not None and raft.role is Role.LEADER and raft.epoch == epoch
    end = propose(sim, b"after")
    wait_committed(sim, end, sorted(sim.nodes))


def test_a_leader_cut_off_from_its_quorum_resigns_and_the_rest_elect() -> None:
    sim = quiet_sim()
    leader = elect(sim)
    epoch = sim.nodes[leader].raft.epoch  # type: ignore[union-attr]
    sim.groups = [frozenset([leader]), frozenset(sim.nodes) - {leader}]
    window = SIM_CONFIG.fetch_timeout_ms * 3 // 2
    sim.run_until(sim.now + window + SIM_CONFIG.fetch_timeout_ms // 2 + 10)
    old = sim.nodes[leader].raft
    assert old is not None and old.role is not Role.LEADER  # check-quorum
    sim.run_until(sim.now + 5_000)
    new = sim.leader()
    assert new is not None and new.node_id != leader
    assert new.raft is not None and new.raft.epoch > epoch


def test_graceful_resignation_hands_over_before_an_election_timeout() -> None:
    sim = quiet_sim()
    leader = elect(sim)
    raft = sim.nodes[leader].raft
    assert raft is not None
    end = propose(sim, b"x")
    wait_committed(sim, end, sorted(sim.nodes))
    raft.resign(sim.now)
    sim._after(sim.nodes[leader])
    started = sim.now
    while sim.now - started < 5_000:
        sim.run_until(sim.now + 10)
        new = sim.leader()
        if new is not None and new.node_id != leader:
            break
    assert new is not None and new.node_id != leader
    # The first successor stands at once: far quicker than fetch.timeout.ms.
    assert sim.now - started < SIM_CONFIG.fetch_timeout_ms


def test_a_restarted_voter_keeps_its_vote() -> None:
    store = MemoryQuorumStateStore()
    store.write(ElectionState(epoch=5, leader_id=-1, voted_id=2))
    node = RaftNode(1, frozenset({1, 2, 3}), MemoryRaftLog(), store, random.Random(0),
                    RaftConfig(), 0)
    node.handle(VoteRequest(3, 1, 5, 0, 0, pre_vote=False), 10)
    (resp,) = node.take_outbox()
    assert isinstance(resp, VoteResponse) and not resp.granted
    node.handle(VoteRequest(2, 1, 5, 0, 0, pre_vote=False), 20)
    (resp,) = node.take_outbox()
    assert isinstance(resp, VoteResponse) and resp.granted
    assert store.state == ElectionState(5, -1, 2)


def test_a_vote_is_persisted_before_it_is_granted_and_needs_an_up_to_date_log() -> None:
    store = MemoryQuorumStateStore()
    log = MemoryRaftLog()
    log.append([Entry(0, 2, (b"a",)), Entry(1, 2, (b"b",))])
    node = RaftNode(1, frozenset({1, 2, 3}), log, store, random.Random(0), RaftConfig(), 0)
    node.handle(VoteRequest(2, 1, 3, last_epoch=1, end_offset=9, pre_vote=False), 1)
    (resp,) = node.take_outbox()
    assert not resp.granted  # type: ignore[union-attr]  # an older last epoch loses
    assert store.state == ElectionState(3, -1, -1)  # the epoch moved, no vote given
    node.handle(VoteRequest(3, 1, 3, last_epoch=2, end_offset=2, pre_vote=False), 2)
    (resp,) = node.take_outbox()
    assert resp.granted and store.state == ElectionState(3, -1, 3)  # type: ignore[union-attr]


def test_a_pre_vote_changes_nothing_on_disk() -> None:
    store = MemoryQuorumStateStore()
    node = RaftNode(1, frozenset({1, 2, 3}), MemoryRaftLog(), store, random.Random(0),
                    RaftConfig(), 0)
    writes = store.writes
    node.handle(VoteRequest(2, 1, 7, 0, 0, pre_vote=True), 1)
    (resp,) = node.take_outbox()
    assert isinstance(resp, VoteResponse) and resp.granted and resp.pre_vote
    assert store.writes == writes and node.epoch == 0


def test_votes_from_unknown_nodes_are_refused() -> None:
    node = RaftNode(1, frozenset({1, 2, 3}), MemoryRaftLog(), MemoryQuorumStateStore(),
                    random.Random(0), RaftConfig(), 0)
    node.handle(VoteRequest(9, 1, 1, 0, 0, pre_vote=False), 1)
    (resp,) = node.take_outbox()
    assert isinstance(resp, VoteResponse)
    assert not resp.granted and resp.error == ErrorCode.INCONSISTENT_VOTER_SET
    assert node.epoch == 0 and node.voted_id == -1


def test_fetches_with_a_stale_epoch_are_fenced() -> None:
    sim = quiet_sim()
    leader = elect(sim)
    raft = sim.nodes[leader].raft
    assert raft is not None
    raft.handle(FetchRequest(9, leader, raft.epoch - 1, 0, 0), sim.now)
    (resp,) = raft.take_outbox()
    assert isinstance(resp, FetchResponse)
    assert resp.error == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_id == leader


def test_a_follower_with_an_old_epochs_tail_truncates_to_the_leader() -> None:
    """Node 3 led epoch 1 alone and wrote entries nobody else has; after the
    others elect a leader and commit, node 3 rejoins, is told where its log
    diverges, drops its tail and ends up with the committed log."""
    sim = quiet_sim(seed=3)
    leader = elect(sim)
    lone = leader
    raft = sim.nodes[lone].raft
    assert raft is not None
    sim.groups = [frozenset([lone]), frozenset(sim.nodes) - {lone}]
    for i in range(5):
        raft.propose([b"lost%d" % i], sim.now)  # never replicated
    sim.run_until(sim.now + 8_000)
    other = sim.leader()
    assert other is not None and other.node_id != lone and other.raft is not None
    end = propose(sim, b"kept")
    wait_committed(sim, end, [n for n in sim.nodes if n != lone])
    sim.groups = None
    wait_committed(sim, end, sorted(sim.nodes), within_ms=10_000)
    values = [r for e in sim.nodes[lone].log.entries() for r in e.records]
    assert b"kept" in values and not any(v.startswith(b"lost") for v in values)


def test_a_node_behind_the_log_start_catches_up_from_a_snapshot() -> None:
    sim = quiet_sim(seed=5)
    leader = elect(sim)
    lagging = next(n for n in sim.nodes if n != leader)
    sim.groups = [frozenset([lagging]), frozenset(sim.nodes) - {lagging}]
    end = 0
    for i in range(20):
        end = propose(sim, b"v%d" % i)
        sim.run_until(sim.now + 5)
    wait_committed(sim, end, [n for n in sim.nodes if n != lagging])
    for n in sim.nodes:
        if n != lagging:
            sim._on_snapshot(n)
    assert sim.nodes[leader].log.start_offset == end
    sim.groups = None
    wait_committed(sim, end, sorted(sim.nodes), within_ms=10_000)
    snap = sim.nodes[lagging].log.snapshot()
    assert snap is not None and snap.end_offset == end


def test_an_observer_finds_the_leader_and_never_votes() -> None:
    sim = quiet_sim(observers=1)
    elect(sim)
    end = propose(sim, b"seen")
    wait_committed(sim, end, [4])
    observer = sim.nodes[4].raft
    assert observer is not None and observer.role is Role.FOLLOWER
    assert sim.nodes[4].store.state is not None and sim.nodes[4].store.state.voted_id == -1
    observer.handle(VoteRequest(1, 4, observer.epoch + 1, 9, 9, pre_vote=False), sim.now)
    (resp,) = observer.take_outbox()
    assert isinstance(resp, VoteResponse) and not resp.granted


def test_truncating_below_the_high_watermark_is_fatal() -> None:
    log = MemoryRaftLog()
    log.append([Entry(0, 1, (b"a",)), Entry(1, 1, (b"b",))])
    store = MemoryQuorumStateStore()
    store.write(ElectionState(2, 2, -1))
    node = RaftNode(1, frozenset({1, 2, 3}), log, store, random.Random(0), RaftConfig(), 0)
    node.poll(0)
    (fetch,) = node.take_outbox()
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 2
    node.handle(FetchResponse(2, 1, 2, 2, 2, high_watermark=2), 1)
    assert node.high_watermark == 2
    node.poll(2)
    node.take_outbox()
    with pytest.raises(RaftFatalError):
        node.handle(FetchResponse(2, 1, 2, 2, 2, high_watermark=2, diverging=(0, 0)), 3)


def test_a_new_leader_commits_nothing_before_an_entry_of_its_own_epoch() -> None:
    """Raft's figure-8 rule as KRaft applies it: entries of older epochs that a
    majority holds are not committed by counting them; only once the new
    leader's LeaderChange entry (at the epoch start offset) is on a majority."""
    from odradek.raft.leader import LeaderState

    state = LeaderState(1, epoch=3, epoch_start_offset=5, voters=frozenset({1, 2, 3}),
                        started_ms=0)
    state.record_fetch(2, 5, leader_end=6, now_ms=1)  # follower 2 has the old entries
    assert state.new_high_watermark(leader_flushed=6, current=2) is None
    state.record_fetch(2, 6, leader_end=6, now_ms=2)  # ... and now the LeaderChange entry
    assert state.new_high_watermark(leader_flushed=6, current=2) == 6
    # The leader's unflushed tail does not count.
    state.record_fetch(3, 9, leader_end=9, now_ms=3)
    assert state.new_high_watermark(leader_flushed=6, current=6) is None


def test_check_quorum_counts_only_recent_fetches() -> None:
    from odradek.raft.leader import LeaderState

    state = LeaderState(1, epoch=1, epoch_start_offset=0, voters=frozenset({1, 2, 3, 4, 5}),
                        started_ms=0)
    window = 3000
    assert state.has_quorum(1000, window)  # a new leader gets a whole window
    state.record_fetch(2, 1, 1, now_ms=4000)
    assert not state.has_quorum(5000, window)  # itself and one follower: 2 of 5
    state.record_fetch(3, 1, 1, now_ms=4500)
    assert state.has_quorum(5000, window)
    assert not state.has_quorum(8000, window)  # their fetches are too old now


def test_a_voter_stranded_in_a_higher_epoch_is_brought_back() -> None:
    """Found by the simulation (seed 336 of test_three_voters before the fix): a
    voter that stood in epoch E+1 while its votes were lost is left in E+1 with no
    leader, while the leader of E keeps a majority; its pre-votes are refused
    (the others hear their leader), so it stays out for good. The leader resends
    BeginQuorumEpoch to voters that do not fetch; the stranded voter answers with
    its higher epoch, the leader steps down, and one election brings all three
    back under one leader."""
    from odradek.raft.quorum_state import ElectionState

    sim = quiet_sim(seed=7)
    leader = elect(sim)
    epoch = sim.nodes[leader].raft.epoch  # type: ignore[union-attr]
    stranded = next(n for n in sim.nodes if n != leader)
    sim._on_crash(stranded)
    sim.nodes[stranded].store.write(ElectionState(epoch + 1, -1, stranded))
    sim._queue = [e for e in sim._queue if e.kind != "restart"]
    sim._on_restart(stranded)
    deadline = sim.now + 15_000
    while sim.now < deadline:
        sim.run_until(sim.now + 100)
        rafts = [n.raft for n in sim.nodes.values()]
        if all(r is not None for r in rafts):
            leaders = {r.leader_id for r in rafts if r is not None}
            epochs = {r.epoch for r in rafts if r is not None}
            if len(leaders) == 1 and -1 not in leaders and len(epochs) == 1:
                assert epochs.pop() > epoch
                break
    else:
        raise AssertionError("the stranded voter never rejoined")
    end = propose(sim, b"after")
    wait_committed(sim, end, sorted(sim.nodes))


def test_a_leader_tells_no_high_watermark_before_it_commits_in_its_epoch() -> None:
    """KRaft's leaders answer a Fetch with high watermark -1 until the entry that
    starts their epoch is committed: a restarted leader's log start (or an old
    high watermark) is no committed offset of the current epoch, and a follower
    that took it as one would say it caught up with nothing applied (a full
    restart of a cluster moved every partition aside that way)."""
    log = MemoryRaftLog()
    log.append([Entry(0, 1, (b"a",)), Entry(1, 1, (b"b",))])
    log.flush()
    store = MemoryQuorumStateStore()
    store.write(ElectionState(1, -1, -1))
    node = RaftNode(1, frozenset({1, 2, 3}), log, store, random.Random(0), RaftConfig(), 0)
    node._become_candidate(0)
    node.handle(VoteResponse(2, 1, 2, -1, True, False), 1)
    assert node.role is Role.LEADER and node.epoch == 2
    node.take_outbox()
    # Follower 2 fetches from offset 2 (it has both old entries): the LeaderChange
    # entry at 2 is not on a majority yet, so nothing of epoch 2 is committed.
    node.handle(FetchRequest(2, 1, 2, 2, 1), 2)
    (answer,) = [m for m in node.take_outbox() if isinstance(m, FetchResponse)]
    assert answer.high_watermark == -1 and node.advertised_high_watermark == -1
    assert not node.caught_up(2)
    # Its next fetch shows it has the LeaderChange entry: now the HW is known.
    node.poll(3)
    node.handle(FetchRequest(2, 1, 2, 3, 2), 4)
    answers = [m for m in node.take_outbox() if isinstance(m, FetchResponse)]
    assert answers and answers[-1].high_watermark == 3
    assert node.caught_up(3) and not node.caught_up(2)


def test_a_follower_catches_up_only_past_a_known_hw_and_its_own_recovered_log() -> None:
    """A restarted follower with four entries on disk is not caught up by a -1
    high watermark, nor before it has applied the first high watermark a leader
    told it, nor before it has applied what its log held when it started."""
    log = MemoryRaftLog()
    log.append([Entry(i, 1, (b"x",)) for i in range(4)])
    log.flush()
    store = MemoryQuorumStateStore()
    store.write(ElectionState(2, 2, -1))
    node = RaftNode(1, frozenset({1, 2, 3}), log, store, random.Random(0), RaftConfig(), 0)
    assert node.recovered_end == 4
    node.poll(0)
    (fetch,) = node.take_outbox()
    node.handle(FetchResponse(2, 1, 2, 2, fetch.fetch_offset, high_watermark=-1), 1)
    assert not node.hw_from_leader and not node.caught_up(4)
    node.poll(2)
    (fetch,) = node.take_outbox()
    node.handle(FetchResponse(2, 1, 2, 2, fetch.fetch_offset, high_watermark=3,
                              entries=(Entry(4, 2, (b"lc",), control=True),)), 3)
    assert node.hw_from_leader and node.first_leader_hw == 3
    assert not node.caught_up(3)  # its own log held 4 entries when it started
    assert node.caught_up(4)
    # A truncation lowers what it must reach: those entries were never committed.
    node2 = RaftNode(1, frozenset({1, 2, 3}), log, store, random.Random(0), RaftConfig(), 0)
    assert node2.recovered_end == 5
    node2.poll(0)
    node2.take_outbox()
    node2.handle(FetchResponse(2, 1, 2, 2, 5, high_watermark=-1, diverging=(1, 2)), 1)
    assert node2.recovered_end == 2 and log.end_offset == 2


def test_seed_75_a_follower_is_not_caught_up_while_its_log_lags_the_first_hw() -> None:
    """Found by the simulation (seed 75 of test_three_voters, with the full
    restarts): a follower whose log was behind took the high watermark of its
    first fetch, capped at its own log end, as caught up (19, while 23 were
    committed before every node restarted). caught_up now compares with the
    leader's own first high watermark."""
    RaftSim(75, 3, 0).run(chaos_ms=8_000)

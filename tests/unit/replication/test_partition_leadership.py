"""The partition state machine led and followed by the controller's metadata: apply_metadata,
the replica fetch with its diverging-epoch check, ISR proposals (shrink by lag, expansion,
the maximal ISR, broker epochs), the min-ISR rule for the HW and for acks=all, and the
follower's truncations. The seeded simulation (test_replication_sim.py) runs all of it
together; these are the cases one by one."""

from __future__ import annotations

from odradek.common.clock import ManualClock
from odradek.replication.partition import Origin, PartitionState, ReplicaRead
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.errors import ErrorCode
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
LAG = 10_000


def open_state(local_id: int, *, min_isr: int = 1) -> PartitionState:
    clock = ManualClock(NOW)
    log = Log.open(MemoryFileSystem(clock), "/d/t-0", LogConfig(), clock)
    return PartitionState("t", 0, log, local_id=local_id, leader_id=-1, min_isr=min_isr)


def produce(st: PartitionState, *values: bytes, acks: int = 1) -> int:
    r = st.append_as_leader(memoryview(make_batch(list(values))), Origin.CLIENT, acks)
    assert r.error_code == 0, r
    return r.last_offset


def fetch(leader: PartitionState, follower: PartitionState, now: int = NOW,
          broker_epoch: int = -1) -> ReplicaRead:
    """One replica fetch, its answer applied as the shell would."""
    args = (follower.local_id, follower.log_end_offset, follower.last_fetched_epoch, 1 << 20,
            now)
    rr = (leader.read_for_follower(*args, broker_epoch) if broker_epoch >= 0
          else leader.read_for_follower(*args))
    if rr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        follower.truncate_fully_and_start_at(rr.log_start_offset)
    elif rr.diverging_epoch >= 0:
        follower.truncate_to_divergence(rr.diverging_epoch, rr.diverging_end_offset)
    elif rr.error_code == 0:
        data = leader.log.read_bytes(rr.slices)
        assert follower.append_as_follower(memoryview(data), rr.high_watermark,
                                           rr.log_start_offset).error_code == 0
    return rr


def records(st: PartitionState) -> bytes:
    return st.log.read_records(st.log_start_offset, 1 << 30) if st.log_end_offset else b""


def test_apply_metadata_leads_follows_and_ignores_an_older_epoch_while_leading() -> None:
    st = open_state(1)
    assert not st.is_leader
    assert st.apply_metadata(1, 3, 5, [1, 2, 3], [1, 2], NOW)
    assert (st.is_leader, st.leader_epoch, st.partition_epoch, st.isr) == (True, 3, 5, {1, 2})
    assert sorted(st.replicas) == [1, 2, 3] and st.log.epochs.entries == [(3, 0)]
    produce(st, b"a", b"b")
    assert not st.apply_metadata(1, 2, 4, [1, 2, 3], [1], NOW)  # a stale view
    assert st.leader_epoch == 3 and st.isr == {1, 2}
    # An ISR change in the same epoch: no role change.
    assert not st.apply_metadata(1, 3, 6, [1, 2, 3], [1, 2, 3], NOW)
    assert st.isr == {1, 2, 3} and st.epoch_start_offset == 0
    # A new leader: this replica follows it, its ISR forgotten.
    assert st.apply_metadata(2, 4, 7, [1, 2, 3], [1, 2, 3], NOW)
    assert (st.is_leader, st.leader_id, st.leader_epoch, st.isr) == (False, 2, 4, set())
    assert st.append_as_leader(memoryview(make_batch([b"x"])), Origin.CLIENT).error_code \
        == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_fetches_and_takes_the_leaders_high_watermark() -> None:
    leader, follower = open_state(1), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    follower.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    produce(leader, b"a", b"b")
    assert leader.high_watermark == 0  # 2 has not fetched yet
    rr = fetch(leader, follower)
    assert rr.size > 0 and follower.log_end_offset == 2 and follower.high_watermark == 0
    rr = fetch(leader, follower)  # from the leader's log end: the HW moves
    assert rr.hw_moved and leader.high_watermark == 2 and follower.high_watermark == 2
    assert records(follower) == records(leader)
    assert follower.last_fetched_epoch == 1


def test_read_for_follower_names_the_epoch_where_the_logs_diverge() -> None:
    """Replica 2 led in epoch 2 and wrote records nobody else got; 1 leads in epoch 3."""
    one, two = open_state(1), open_state(2)
    one.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    produce(one, b"a", b"b")
    fetch(one, two)
    two.apply_metadata(2, 2, 2, [1, 2], [2], NOW)
    produce(two, b"lost-1")
    produce(two, b"lost-2")
    one.apply_metadata(1, 3, 3, [1, 2], [1], NOW)
    produce(one, b"c")
    two.apply_metadata(1, 3, 3, [1, 2], [1], NOW)
    assert two.last_fetched_epoch == 2 and two.log_end_offset == 4
    rr = one.read_for_follower(2, 4, 2, 1 << 20, NOW)
    # 1 never had epoch 2: its largest epoch below it, 1, ended at 2.
    assert (rr.error_code, rr.diverging_epoch, rr.diverging_end_offset) == (0, 1, 2)
    assert rr.size == 0 and one.replicas[2].last_fetch_ms == -1  # nothing recorded
    assert two.truncate_to_divergence(1, 2) == 2
    fetch(one, two)
    assert records(two) == records(one) and two.last_fetched_epoch == 3


def test_a_follower_older_than_every_epoch_of_the_leader_is_told_to_truncate() -> None:
    """The leader's first epoch is 5 (at offset 0); the follower has records of epoch 1
    only. The leader once answered "diverging at epoch -1", which reads as no
    divergence: the follower took the HW over records that were never committed
    (found by the replication simulation)."""
    leader, follower = open_state(1), open_state(2)
    follower.apply_metadata(2, 1, 1, [1, 2], [2], NOW)
    produce(follower, b"stale-1", b"stale-2")  # as leader in epoch 1
    leader.apply_metadata(1, 5, 2, [1, 2], [1], NOW)
    produce(leader, b"a", b"b", b"c")
    follower.apply_metadata(1, 5, 2, [1, 2], [1], NOW)
    rr = leader.read_for_follower(2, 2, 1, 1 << 20, NOW)
    assert (rr.diverging_epoch, rr.diverging_end_offset) == (1, 0)
    follower.truncate_to_divergence(rr.diverging_epoch, rr.diverging_end_offset)
    assert follower.log_end_offset == 0
    fetch(leader, follower)
    fetch(leader, follower)
    assert records(follower) == records(leader) and follower.high_watermark == 3


def test_offset_out_of_range_below_the_log_start_and_past_the_log_end() -> None:
    leader, follower = open_state(1), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    follower.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    for v in (b"a", b"b", b"c", b"d"):
        produce(leader, v)
    assert leader.high_watermark == 4  # the ISR is the leader alone, min.insync.replicas 1
    leader.delete_records(3)
    rr = leader.read_for_follower(2, 0, -1, 1 << 20, NOW)
    assert (rr.error_code, rr.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 3)
    assert leader.read_for_follower(2, 9, -1, 1 << 20, NOW).error_code \
        == ErrorCode.OFFSET_OUT_OF_RANGE
    fetch(leader, follower)  # starts over at 3
    assert (follower.log_start_offset, follower.log_end_offset) == (3, 3)
    fetch(leader, follower)
    assert follower.log_end_offset == 4 and records(follower) == records(leader)


def test_a_follower_starting_over_inside_a_batch_takes_the_whole_batch() -> None:
    """DeleteRecords moved the leader's log start into a batch: a follower below it
    starts over there and is sent that batch, which begins earlier (it could never
    append it; found by the replication simulation)."""
    leader, follower = open_state(1), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    follower.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    produce(leader, b"a")
    produce(leader, b"b", b"c", b"d")  # offsets 1..3
    leader.delete_records(2)
    fetch(leader, follower)
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 2)
    fetch(leader, follower)
    assert follower.log_end_offset == 4 and follower.log_start_offset == 2
    assert follower.high_watermark == 4


def test_propose_isr_shrinks_by_lag_and_expands_a_caught_up_follower() -> None:
    leader, two, three = open_state(1), open_state(2), open_state(3)
    leader.apply_metadata(1, 1, 1, [1, 2, 3], [1, 2, 3], NOW)
    for f in (two, three):
        f.apply_metadata(1, 1, 1, [1, 2, 3], [1, 2, 3], NOW)
    produce(leader, b"a")
    assert leader.propose_isr(NOW + LAG, LAG) is None  # nobody lagging for long yet
    fetch(leader, two, NOW + LAG)
    fetch(leader, two, NOW + LAG)
    # 3 has not fetched since NOW (when the leadership began): it lags.
    proposal = leader.propose_isr(NOW + LAG + 1, LAG)
    assert proposal == frozenset({1, 2}) and leader.pending_isr == proposal
    assert leader.maximal_isr == {1, 2, 3}  # dropped members count until confirmed
    assert leader.propose_isr(NOW + LAG + 1, LAG) is None  # one change at a time
    produce(leader, b"b")
    fetch(leader, two, NOW + LAG + 1)
    assert leader.high_watermark == 0  # still held by 3, which has nothing
    leader.apply_metadata(1, 1, 2, [1, 2, 3], [1, 2], NOW + LAG + 2)
    assert leader.pending_isr is None and leader.isr == {1, 2}
    assert leader.high_watermark == 1  # 2's log end as of its last fetch
    fetch(leader, two, NOW + LAG + 2)
    assert leader.high_watermark == 2
    # 3 catches up: the fetch that reaches the HW says it may join.
    rr = fetch(leader, three, NOW + LAG + 3)
    assert not rr.expand  # from 0: not caught up yet
    rr = fetch(leader, three, NOW + LAG + 3)
    assert rr.expand
    proposal = leader.propose_isr(NOW + LAG + 3, LAG, eligible=[1, 2, 3])
    assert proposal == frozenset({1, 2, 3}) and leader.maximal_isr == {1, 2, 3}
    leader.isr_change_failed()  # the controller refused it
    assert leader.pending_isr is None and leader.maximal_isr == {1, 2}
    assert leader.propose_isr(NOW + LAG + 3, LAG, eligible=[1, 2]) is None  # 3 not live


def test_added_members_count_for_the_high_watermark_at_once() -> None:
    leader, two = open_state(1), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    produce(leader, b"a")
    fetch(leader, two)
    fetch(leader, two)  # from the leader's log end (the HW): caught up
    assert leader.propose_isr(NOW, LAG) == frozenset({1, 2})
    produce(leader, b"b")
    assert leader.high_watermark == 1  # 2 counts already: it has only offset 0
    fetch(leader, two)
    fetch(leader, two)
    assert leader.high_watermark == 2


def test_a_log_end_fetched_before_a_restart_does_not_make_a_replica_eligible() -> None:
    """Replica 2 fetched up to the log end in broker epoch 7, then restarted (epoch 9)
    with an empty log. The leader proposed it for the ISR on the old log end, and
    the controller (seeing it live again) took it in: an ISR member without the
    committed records (found by the replication simulation). With broker epochs
    (KIP-903) the stale log end no longer counts."""
    leader, two = open_state(1), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    produce(leader, b"a", b"b")
    fetch(leader, two, broker_epoch=7)
    fetch(leader, two, broker_epoch=7)
    assert leader.replicas[2].log_end_offset == 2 and leader.replicas[2].broker_epoch == 7
    # 2 restarts: the controller's metadata now says broker 2 is live in epoch 9.
    assert leader.propose_isr(NOW, LAG, eligible={1: 3, 2: 9}) is None
    assert leader.propose_isr(NOW, LAG, eligible={1: 3, 2: 7}) == frozenset({1, 2})


def test_the_high_watermark_holds_while_the_isr_is_below_min_insync_replicas() -> None:
    leader, two = open_state(1, min_isr=2), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    produce(leader, b"a")
    assert leader.high_watermark == 0  # the leader alone, min.insync.replicas 2
    fetch(leader, two)
    fetch(leader, two)
    assert leader.high_watermark == 0  # 2 has it, but is no member yet
    assert leader.propose_isr(NOW, LAG) == frozenset({1, 2})
    assert leader.high_watermark == 0  # a pending addition is not enough either
    leader.apply_metadata(1, 1, 2, [1, 2], [1, 2], NOW)
    assert leader.high_watermark == 1


def test_acks_all_needs_min_insync_replicas() -> None:
    leader, two = open_state(1, min_isr=2), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1], NOW)
    r = leader.append_as_leader(memoryview(make_batch([b"a"])), Origin.CLIENT, -1)
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and leader.log_end_offset == 0
    assert produce(leader, b"a", acks=1) == 0  # acks=1 is taken
    leader.apply_metadata(1, 1, 2, [1, 2], [1, 2], NOW)
    last = produce(leader, b"b", acks=-1)
    assert leader.replicated(last) is None  # 2 has not fetched it
    fetch(leader, two)
    fetch(leader, two)
    assert leader.replicated(last) == 0


def test_not_enough_replicas_after_append_when_the_isr_shrank_meanwhile() -> None:
    leader, two = open_state(1, min_isr=2), open_state(2)
    leader.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    last = produce(leader, b"a", acks=-1)
    fetch(leader, two)
    fetch(leader, two)
    assert leader.high_watermark == 1
    leader.apply_metadata(1, 1, 2, [1, 2], [1], NOW)  # 2 dropped before the answer
    assert leader.replicated(last) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.log_end_offset == 1  # the records stay


def test_an_epoch_without_records_is_dropped_by_a_truncation_that_cuts_nothing() -> None:
    """Replica 2 became leader in epoch 2 at offset 1 and appended nothing; 1 leads in
    epoch 3. 2's last fetched epoch (2) is unknown to 1, which answers "epoch 1
    ends at 1"; truncating to 1 cut nothing and kept epoch 2, so every fetch got
    the same answer (found by the replication simulation)."""
    one, two = open_state(1), open_state(2)
    one.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    two.apply_metadata(1, 1, 1, [1, 2], [1, 2], NOW)
    produce(one, b"a")
    fetch(one, two)
    two.apply_metadata(2, 2, 2, [1, 2], [2], NOW)
    assert two.log.epochs.entries == [(1, 0), (2, 1)]
    one.apply_metadata(1, 3, 3, [1, 2], [1], NOW)
    produce(one, b"b")
    two.apply_metadata(1, 3, 3, [1, 2], [1], NOW)
    rr = fetch(one, two)
    assert (rr.diverging_epoch, rr.diverging_end_offset) == (1, 1)
    assert two.log.epochs.entries == [(1, 0)] and two.last_fetched_epoch == 1
    fetch(one, two)
    assert records(two) == records(one)


def test_isr_shrinks_and_expands_are_counted_while_leading_into_a_shared_counter() -> None:
    from odradek.replication.partition import IsrChangeCounts

    counts = IsrChangeCounts()
    st = open_state(1)
    st.isr_changes = counts
    st.apply_metadata(1, 3, 5, [1, 2, 3], [1, 2, 3], NOW)    # a new term: nothing counted
    assert (counts.shrinks, counts.expands) == (0, 0)
    st.apply_metadata(1, 3, 6, [1, 2, 3], [1, 2], NOW)       # the controller dropped 3
    st.become_leader(3, [1, 2, 3], [1], partition_epoch=7)   # an AlterPartition's answer
    st.apply_metadata(1, 3, 7, [1, 2, 3], [1], NOW)          # the same ISR again
    assert (counts.shrinks, counts.expands) == (2, 0)
    st.apply_metadata(1, 3, 8, [1, 2, 3], [1, 2, 3], NOW)
    assert (counts.shrinks, counts.expands) == (2, 1)
    st.apply_metadata(2, 4, 9, [1, 2, 3], [2, 3], NOW)       # follows: nothing counted
    st.apply_metadata(1, 5, 10, [1, 2, 3], [1], NOW)         # leads anew: nothing counted
    assert (counts.shrinks, counts.expands) == (2, 1)

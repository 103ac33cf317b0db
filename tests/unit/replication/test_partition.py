"""The partition state machine: validation before the producer check, the one place
the high watermark moves, reads bounded by it, follower appends and deletion."""

from __future__ import annotations

import struct

from odradek.common.clock import ManualClock
from odradek.replication.partition import READ_COMMITTED, Origin, PartitionState
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.batch import iter_batches
from odradek.wire.errors import ErrorCode
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


def open_state(local_id: int = 1, fs: MemoryFileSystem | None = None,
               **kw: object) -> PartitionState:
    clock = ManualClock(NOW)
    fs = fs or MemoryFileSystem(clock)
    log = Log.open(fs, "/d/t-0", LogConfig(), clock)
    return PartitionState("t", 0, log, local_id=local_id, **kw)  # type: ignore[arg-type]


def idem(values: list[bytes], seq: int, pid: int = 7, epoch: int = 0) -> memoryview:
    return memoryview(make_batch(values, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq))


def corrupt_crc(batch: memoryview) -> memoryview:
    data = bytearray(batch)
    crc = struct.unpack_from(">I", data, 17)[0]
    struct.pack_into(">I", data, 17, crc ^ 0xFFFF)
    return memoryview(bytes(data))


def test_single_replica_moves_the_high_watermark_with_the_log_end() -> None:
    st = open_state()
    r = st.append_as_leader(memoryview(make_batch([b"a", b"b"])), Origin.CLIENT)
    assert (r.error_code, r.first_offset, r.last_offset, r.hw_moved) == (0, 0, 1, True)
    assert st.high_watermark == st.log_end_offset == 2


def test_a_retry_with_a_bad_crc_is_corrupt_not_a_duplicate() -> None:
    st = open_state()
    first = idem([b"x"], seq=0)
    assert st.append_as_leader(first, Origin.CLIENT).first_offset == 0
    retry = st.append_as_leader(first, Origin.CLIENT)
    assert retry.duplicate and retry.first_offset == 0 and not retry.appended
    bad = st.append_as_leader(corrupt_crc(first), Origin.CLIENT)
    assert bad.error_code == ErrorCode.CORRUPT_MESSAGE and not bad.duplicate
    assert st.log_end_offset == 1
    assert len(iter_batches(st.log.read_records(0, 1 << 20))) == 1


def test_producer_errors_come_back_as_codes() -> None:
    st = open_state()
    st.append_as_leader(idem([b"x"], seq=0, epoch=1), Origin.CLIENT)
    old = st.append_as_leader(idem([b"y"], seq=1, epoch=0), Origin.CLIENT)
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    gap = st.append_as_leader(idem([b"y"], seq=5, epoch=1), Origin.CLIENT)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert st.log_end_offset == 1


def test_high_watermark_is_the_minimum_log_end_over_the_isr() -> None:
    st = open_state()
    st.become_leader(3, replicas=[1, 2, 3], isr=[1, 2, 3])
    r = st.append_as_leader(memoryview(make_batch([b"a", b"b", b"c"])), Origin.CLIENT)
    assert r.appended and not r.hw_moved and st.high_watermark == 0
    assert not st.update_follower(2, 3, NOW)  # 3 still has nothing
    assert st.update_follower(3, 2, NOW) and st.high_watermark == 2
    assert st.update_follower(3, 3, NOW) and st.high_watermark == 3
    # A stale (lower) follower offset never moves the HW back.
    assert not st.update_follower(3, 1, NOW) and st.high_watermark == 3
    # The leader's epoch is stamped on the batch and kept in the epoch cache.
    assert st.log.epochs.entries == [(3, 0)]


def test_reads_stop_at_the_high_watermark() -> None:
    st = open_state()
    st.become_leader(0, replicas=[1, 2], isr=[1, 2])
    st.append_as_leader(memoryview(make_batch([b"a"])), Origin.CLIENT)
    st.append_as_leader(memoryview(make_batch([b"b"])), Origin.CLIENT)
    assert st.read(0, 1 << 20).size == 0
    st.update_follower(2, 1, NOW)
    read = st.read(0, 1 << 20)
    assert (read.error_code, read.high_watermark, len(iter_batches(st.log.read_bytes(
        read.slices)))) == (0, 1, 1)
    assert st.read(0, 1 << 20, READ_COMMITTED).last_stable_offset == 1
    assert st.read(9, 100).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_follower_keeps_the_leaders_offsets_and_takes_its_high_watermark() -> None:
    leader = open_state(1)
    follower = open_state(2)
    follower.become_follower(0, leader_id=1)
    leader.append_as_leader(memoryview(make_batch([b"a", b"b"])), Origin.CLIENT)
    refused = follower.append_as_leader(memoryview(make_batch([b"z"])), Origin.CLIENT)
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    data = leader.log.read_records(0, 1 << 20)
    r = follower.append_as_follower(memoryview(data), leader_hw=1)
    assert r.first_offset == 0 and follower.log_end_offset == 2
    assert follower.high_watermark == 1
    assert follower.log.read_records(0, 1 << 20) == data


def test_delete_records_forgets_producers_below_the_new_start() -> None:
    st = open_state()
    st.append_as_leader(idem([b"x"], seq=0), Origin.CLIENT)
    st.append_as_leader(memoryview(make_batch([b"y"])), Origin.CLIENT)
    assert st.delete_records(-1) == 2
    assert 7 not in st.producers.producers


def test_producer_state_survives_a_reopen() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    st = open_state(fs=fs)
    first = idem([b"x"], seq=0)
    st.append_as_leader(first, Origin.CLIENT)
    st.log.close()
    again = open_state(fs=fs)
    assert again.high_watermark == 1
    assert again.append_as_leader(first, Origin.CLIENT).duplicate


def test_a_leadership_taken_and_lost_without_an_append_does_not_make_the_follower_loop(
) -> None:
    """A replica that led at epoch 2 without appending anything has an epoch entry
    at its log end; following a leader that never had epoch 2, the divergence
    answer points at that log end, and the entry must go, or every fetch
    diverges again (seen in the chaos harness: ``truncated 0 -> 0`` forever)."""
    leader = open_state(1)
    leader.become_leader(1, replicas=[1, 2], isr=[1, 2])
    leader.append_as_leader(memoryview(make_batch([b"a", b"b"])), Origin.CLIENT)
    follower = open_state(2)
    follower.become_follower(1, leader_id=1)
    follower.append_as_follower(memoryview(leader.log.read_records(0, 1 << 20)), leader_hw=2)
    follower.become_leader(2, replicas=[1, 2], isr=[2])  # elected, appends nothing
    assert follower.last_fetched_epoch == 2
    follower.become_follower(3, leader_id=1)  # the old leader leads again
    leader.become_leader(3, replicas=[1, 2], isr=[1, 2])
    for _ in range(3):
        read = leader.read_for_follower(2, follower.log_end_offset, follower.last_fetched_epoch,
                                        1 << 20, NOW)
        if read.diverging_epoch < 0 and read.diverging_end_offset < 0:
            break
        follower.truncate_to_divergence(read.diverging_epoch, read.diverging_end_offset)
    else:
        raise AssertionError("the follower's fetch diverges again and again")
    assert read.error_code == 0 and follower.log_end_offset == 2
    assert follower.last_fetched_epoch == 1


def test_a_new_leaders_high_watermark_is_unknown_until_it_reaches_its_epoch_start() -> None:
    """A follower learns the HW one fetch late, so when it is elected its HW can be
    below the one the old leader gave out; until its HW reaches the start of its
    epoch, ListOffsets(latest) must not answer it (OFFSET_NOT_AVAILABLE)."""
    leader = open_state(1)
    leader.become_leader(1, replicas=[1, 2], isr=[1, 2])
    leader.append_as_leader(memoryview(make_batch([b"a", b"b", b"c"])), Origin.CLIENT)
    follower = open_state(2)
    follower.become_follower(1, leader_id=1)
    follower.append_as_follower(memoryview(leader.log.read_records(0, 1 << 20)), leader_hw=0)
    leader.update_follower(2, 3, NOW)
    assert leader.high_watermark == 3 and leader.high_watermark_known
    assert follower.high_watermark_known  # a follower answers no ListOffsets anyway
    follower.become_leader(2, replicas=[1, 2], isr=[1, 2])  # before it heard of HW 3
    assert follower.high_watermark == 0 and not follower.high_watermark_known
    follower.update_follower(1, 3, NOW)
    assert follower.high_watermark == 3 and follower.high_watermark_known

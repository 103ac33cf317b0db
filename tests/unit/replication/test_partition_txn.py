"""Transactions in the partition state machine: open transactions hold the last
stable offset back, markers (from the coordinator only) end them, aborted ones
are reported to read_committed reads, and all of it survives a reopen."""

from __future__ import annotations

import struct

from odradek.common.clock import ManualClock
from odradek.replication.partition import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Origin,
    PartitionState,
)
from odradek.replication.producer_state import AbortedTxn
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.batch import ATTR_TRANSACTIONAL
from odradek.wire.errors import ErrorCode
from odradek.wire.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, control_record
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


def open_state(fs: MemoryFileSystem, clock: ManualClock) -> PartitionState:
    log = Log.open(fs, "/d/t-0", LogConfig(), clock)
    return PartitionState("t", 0, log, local_id=1)


def txn(values: list[bytes], pid: int, seq: int, epoch: int = 0) -> memoryview:
    return memoryview(make_batch(values, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, attributes=ATTR_TRANSACTIONAL))


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> memoryview:
    kind = CONTROL_COMMIT if commit else CONTROL_ABORT
    return memoryview(build_batch(
        [control_record(kind, offset=0, timestamp=NOW, coordinator_epoch=coordinator_epoch)],
        producer_id=pid, producer_epoch=epoch, transactional=True, control=True))


def test_open_transactions_hold_the_lso_and_markers_release_it() -> None:
    clock = ManualClock(NOW)
    st = open_state(MemoryFileSystem(clock), clock)
    st.append_as_leader(memoryview(make_batch([b"plain"])), Origin.CLIENT)        # 0
    assert st.append_as_leader(txn([b"a1", b"a2"], pid=5, seq=0), Origin.CLIENT).first_offset == 1
    st.append_as_leader(txn([b"b1"], pid=6, seq=0), Origin.CLIENT)                # 3
    assert st.high_watermark == 4 and st.last_stable_offset == 1
    assert st.fetchable_offset(READ_COMMITTED) == 1
    assert st.fetchable_offset(READ_UNCOMMITTED) == 4
    r = st.append_as_leader(marker(5, commit=True), Origin.COORDINATOR)           # 4
    assert r.error_code == 0 and r.first_offset == 4
    assert st.last_stable_offset == 3  # pid 6 still open at 3
    st.append_as_leader(marker(6, commit=False), Origin.COORDINATOR)              # 5
    assert st.last_stable_offset == st.high_watermark == 6
    read = st.read(0, 1 << 20, READ_COMMITTED)
    assert list(read.aborted or []) == [AbortedTxn(6, 3, 5, 6)]
    assert st.read(0, 1 << 20, READ_UNCOMMITTED).aborted is None
    assert st.read(6, 1 << 20, READ_COMMITTED).aborted == []  # past it: nothing to report


def test_a_client_may_not_write_markers_and_a_stale_marker_is_refused() -> None:
    clock = ManualClock(NOW)
    st = open_state(MemoryFileSystem(clock), clock)
    st.append_as_leader(txn([b"a"], pid=5, seq=0, epoch=3), Origin.CLIENT)
    by_client = st.append_as_leader(marker(5, commit=True, epoch=3), Origin.CLIENT)
    assert by_client.error_code == ErrorCode.INVALID_RECORD
    stale = st.append_as_leader(marker(5, commit=True, epoch=2), Origin.COORDINATOR)
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    st.append_as_leader(marker(5, commit=False, epoch=3, coordinator_epoch=4),
                        Origin.COORDINATOR)
    st.append_as_leader(txn([b"b"], pid=5, seq=1, epoch=3), Origin.CLIENT)
    fenced = st.append_as_leader(marker(5, commit=True, epoch=3, coordinator_epoch=3),
                                 Origin.COORDINATOR)
    assert fenced.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert st.last_stable_offset == 2  # the second transaction is still open


def test_a_marker_without_an_open_transaction_changes_nothing() -> None:
    clock = ManualClock(NOW)
    st = open_state(MemoryFileSystem(clock), clock)
    st.append_as_leader(marker(9, commit=False), Origin.COORDINATOR)
    assert st.last_stable_offset == st.high_watermark == 1
    assert list(st.producers.aborted) == []


def test_transactions_are_rebuilt_from_the_log_on_reopen() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    st = open_state(fs, clock)
    st.append_as_leader(txn([b"a"], pid=5, seq=0), Origin.CLIENT)                 # 0
    st.append_as_leader(marker(5, commit=False), Origin.COORDINATOR)              # 1
    st.append_as_leader(txn([b"b"], pid=6, seq=0), Origin.CLIENT)                 # 2 open
    st.log.close()
    again = open_state(fs, clock)
    assert again.last_stable_offset == 2
    assert again.producers.aborted == [AbortedTxn(5, 0, 1, 2)]
    again.append_as_leader(marker(6, commit=True), Origin.COORDINATOR)
    assert again.last_stable_offset == again.high_watermark == 4


def test_aborted_transactions_are_written_to_the_txnindex_in_kafkas_format() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    st = open_state(fs, clock)
    st.append_as_leader(txn([b"a"], pid=5, seq=0), Origin.CLIENT)                 # 0
    st.append_as_leader(txn([b"b"], pid=6, seq=0), Origin.CLIENT)                 # 1
    st.append_as_leader(marker(5, commit=False), Origin.COORDINATOR)              # 2
    raw = fs.read_file("/d/t-0/00000000000000000000.txnindex")
    # int16 version 0, producer id, first offset, marker offset, LSO (pid 6 open at 1)
    assert raw == struct.pack(">hqqqq", 0, 5, 0, 2, 1)


def test_a_reopen_starts_from_the_producer_snapshot_written_at_close() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    st = open_state(fs, clock)
    st.append_as_leader(txn([b"a"], pid=5, seq=0), Origin.CLIENT)                 # 0
    st.append_as_leader(marker(5, commit=False), Origin.COORDINATOR)              # 1
    st.append_as_leader(txn([b"b", b"c"], pid=6, seq=0, epoch=2), Origin.CLIENT)  # 2-3 open
    st.log.flush()
    st.log.close()
    assert fs.exists("/d/t-0/00000000000000000004.snapshot")
    again = open_state(fs, clock)
    assert again.last_stable_offset == 2
    assert again.producers.aborted == [AbortedTxn(5, 0, 1, 2)]
    entry = again.producers.producers[6]
    assert (entry.epoch, entry.last_seq, entry.txn_first_offset) == (2, 1, 2)
    # the next batch of producer 6 must follow its sequence; a duplicate is one
    dup = again.append_as_leader(txn([b"b", b"c"], pid=6, seq=0, epoch=2), Origin.CLIENT)
    assert dup.duplicate and dup.first_offset == 2
    gap = again.append_as_leader(txn([b"x"], pid=6, seq=5, epoch=2), Origin.CLIENT)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_missing_txnindex_and_a_damaged_snapshot_are_rebuilt_from_the_log() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    st = open_state(fs, clock)
    st.append_as_leader(txn([b"a"], pid=5, seq=0), Origin.CLIENT)
    st.append_as_leader(marker(5, commit=False), Origin.COORDINATOR)
    st.append_as_leader(txn([b"b"], pid=7, seq=0), Origin.CLIENT)
    st.log.flush()
    st.log.close()
    fs.remove("/d/t-0/00000000000000000000.txnindex")
    fs.write_file("/d/t-0/00000000000000000003.snapshot", b"\x00\x01garbage")
    again = open_state(fs, clock)
    assert again.producers.aborted == [AbortedTxn(5, 0, 1, 2)]
    assert again.last_stable_offset == 2
    assert fs.read_file("/d/t-0/00000000000000000000.txnindex") == struct.pack(
        ">hqqqq", 0, 5, 0, 1, 2)


def test_decided_transactions_are_forgotten_once_the_hw_passes_their_marker() -> None:
    clock = ManualClock(NOW)
    st = open_state(MemoryFileSystem(clock), clock)
    for seq in range(50):
        st.append_as_leader(txn([b"v"], pid=5, seq=seq), Origin.CLIENT)
        st.append_as_leader(marker(5, commit=seq % 2 == 0), Origin.COORDINATOR)
    assert len(st.producers.undecided) <= 1  # nobody asked for the LSO meanwhile
    assert len(st.producers.aborted) == 25

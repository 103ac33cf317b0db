"""A node replaying a long metadata log keeps its event loop turning.

A single-voter QuorumDriver starts on a log already holding many committed
entries (a restart). Applying them all in one go held the loop for seconds at
100k partitions, past the quorum's fetch timeout, and the other voters elected
another leader. The driver applies in slices of at most APPLY_SLICE_S and lets
the loop run between them, every entry still applied once and in order.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.broker.control import quorum_driver
from odradek.broker.control.quorum_driver import QuorumDriver
from odradek.common.clock import SystemClock
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.quorum_state import MemoryQuorumStateStore
from odradek.raft.roles import RaftConfig

ENTRIES = 60
APPLY_S = 0.004  # CPU held by applying one entry


def _log_of(entries: int) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append([Entry(i, 1, (b"record-%d" % i,)) for i in range(entries)])
    return log


async def _replay(slice_s: float) -> tuple[list[int], list[int]]:
    """Start a single voter on a full log; per applied entry: its offset and
    how many turns a concurrent task had had by then."""
    applied: list[int] = []
    turns_at_apply: list[int] = []
    turns = 0

    def apply(offset: int, records: list[bytes]) -> None:
        assert records == [b"record-%d" % offset]
        until = time.perf_counter() + APPLY_S
        while time.perf_counter() < until:
            pass
        applied.append(offset)
        turns_at_apply.append(turns)

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    quorum_driver.APPLY_SLICE_S = slice_s
    driver = QuorumDriver(1, {1: ("127.0.0.1", 1)}, "cluster", _log_of(ENTRIES),
                          MemoryQuorumStateStore(), RaftConfig(), SystemClock(),
                          apply, lambda payload: None)
    tick = asyncio.get_running_loop().create_task(ticker())
    try:
        driver.start()
        await asyncio.wait_for(driver.wait_ready(), 30)
        while len(applied) < ENTRIES:  # ready may come before the new leader's entry
            await asyncio.sleep(0.01)
    finally:
        tick.cancel()
        await driver.stop()
    return applied, turns_at_apply


@pytest.fixture(autouse=True)
def _restore_slice() -> object:
    saved = quorum_driver.APPLY_SLICE_S
    yield None
    quorum_driver.APPLY_SLICE_S = saved


def test_a_long_replay_lets_the_loop_run_between_slices() -> None:
    applied, turns = asyncio.run(_replay(slice_s=0.02))
    assert applied == list(range(ENTRIES))
    # ~5 entries a 20 ms slice: the concurrent task ran between slices, many times.
    assert len(set(turns)) >= ENTRIES // 10, turns
    # ... and not between every entry: a slice applies several.
    assert len(set(turns)) < ENTRIES, turns


def test_a_slice_always_applies_at_least_one_entry() -> None:
    applied, turns = asyncio.run(_replay(slice_s=0.0))
    assert applied == list(range(ENTRIES))
    assert len(set(turns)) == ENTRIES, turns  # one entry a slice, the loop ran between


async def _run_and_stop(log: MemoryRaftLog, applied: list[int],
                        restored: list[bytes]) -> QuorumDriver:
    def apply(offset: int, records: list[bytes]) -> None:
        applied.append(offset)

    driver = QuorumDriver(1, {1: ("127.0.0.1", 1)}, "cluster", log,
                          MemoryQuorumStateStore(), RaftConfig(), SystemClock(),
                          apply, restored.append, snapshot=lambda: b"the image")
    driver.start()
    await asyncio.wait_for(driver.wait_ready(), 30)
    while driver.applied < log.end_offset:
        await asyncio.sleep(0.01)
    await driver.stop()
    return driver


def test_a_clean_stop_snapshots_a_long_log_and_the_next_start_restores_it() -> None:
    big = b"x" * 4096
    log = MemoryRaftLog()
    count = quorum_driver.STOP_SNAPSHOT_BYTES // len(big) + 1
    log.append([Entry(i, 1, (big,)) for i in range(count)])
    applied: list[int] = []
    restored: list[bytes] = []
    first = asyncio.run(_run_and_stop(log, applied, restored))
    assert applied == list(range(count)) and restored == []
    snap = log.snapshot()
    assert snap is not None and snap.end_offset == first.applied
    assert log.start_offset == first.applied  # the log before it is dropped

    applied.clear()
    second = asyncio.run(_run_and_stop(log, applied, restored))
    assert len(restored) == 1 and b"the image" in restored[0]
    assert applied == []  # nothing replayed: the snapshot covered the whole log
    assert second.applied >= first.applied


def test_a_clean_stop_takes_no_snapshot_of_a_short_log() -> None:
    log = _log_of(10)
    applied: list[int] = []
    asyncio.run(_run_and_stop(log, applied, []))
    assert applied == list(range(10))
    assert log.snapshot() is None and log.start_offset == 0


async def _propose(records: list[bytes], max_entry_records: int | None) -> list[tuple[int, int]]:
    """A single voter proposes ``records``; the (offset, record count) of each
    entry applied for them."""
    entries: list[tuple[int, int]] = []
    log = MemoryRaftLog()

    def apply(offset: int, batch: list[bytes]) -> None:
        entries.append((offset, len(batch)))

    driver = QuorumDriver(1, {1: ("127.0.0.1", 1)}, "cluster", log,
                          MemoryQuorumStateStore(), RaftConfig(), SystemClock(),
                          apply, lambda payload: None)
    driver.start()
    try:
        await asyncio.wait_for(driver.wait_ready(), 30)
        while not driver.is_leader:
            await asyncio.sleep(0.01)
        end = await asyncio.wait_for(driver.propose(records, max_entry_records), 30)
        assert end == log.end_offset
    finally:
        await driver.stop()
    return entries


def test_a_proposal_that_is_not_atomic_is_committed_in_entries_of_a_bounded_size() -> None:
    records = [b"r%d" % i for i in range(25)]
    entries = asyncio.run(_propose(records, 10))
    assert [n for _, n in entries] == [10, 10, 5]
    assert [o for o, _ in entries] == [entries[0][0], entries[0][0] + 10, entries[0][0] + 20]


def test_an_atomic_proposal_is_one_entry() -> None:
    entries = asyncio.run(_propose([b"r%d" % i for i in range(25)], None))
    assert [n for _, n in entries] == [25]

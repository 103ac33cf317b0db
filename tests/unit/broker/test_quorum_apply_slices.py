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

"""Memory of idle logs (issue 39: at most 4 KiB per idle partition on a broker).

An idle log (created, or reopened after a clean shutdown, and never written)
shares what every idle log holds alike instead of keeping its own copy: its
load report, its leader-epoch entries, its flush policy and disk settings,
and it makes no page-cache window, write stream or segment path until it is
written. The traced Python memory of a reopened idle log stays under a
bound, so a change that gives every log a new container shows here.
"""

from __future__ import annotations

import gc
import tracemalloc

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, LogManager, LogManagerConfig, MemoryFileSystem
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
DIR = "/var/kafka-logs"
LOGS = 300
BYTES_PER_IDLE_LOG = 1_800
"""Measured ~1.4 KB (Log, LocalLog, Segment, epoch cache, queues, flush state,
the directory path and the manager's entry); the broker adds the partition
state and the metadata image on top."""


def manager(fs: MemoryFileSystem, clock: ManualClock) -> LogManager:
    mgr = LogManager(fs, clock, LogManagerConfig(log_dir=DIR), LogConfig())
    mgr.startup()
    return mgr


def idle_logs(fs: MemoryFileSystem, clock: ManualClock) -> None:
    """LOGS logs created with their first epoch, closed cleanly."""
    mgr = manager(fs, clock)
    for p in range(LOGS):
        mgr.get_or_create_log("idle", p).epochs.assign(0, 0)
    mgr.close()


def reopened() -> tuple[LogManager, Log, Log]:
    """The idle logs closed cleanly and reopened; their manager and two of them."""
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    idle_logs(fs, clock)
    mgr = manager(fs, clock)
    a, b = mgr.get_log("idle", 0), mgr.get_log("idle", 1)
    assert a is not None and b is not None
    return mgr, a, b


def test_reopened_idle_logs_share_what_they_hold_alike() -> None:
    mgr, a, b = reopened()
    assert a.epochs.entries == [(0, 0)]
    assert a.load_report is b.load_report and a.load_report.clean
    assert a.epochs._epochs is b.epochs._epochs and a.epochs._starts is b.epochs._starts
    assert a.local.io is b.local.io and a.local.flushes.policy is b.local.flushes.policy
    assert a.local.cache_window is None and a.local.queue._stream is None
    assert a.local.damage == () and a.local.deletes.pending == ()
    mgr.close()


def test_a_written_log_gets_its_own_window_stream_and_epochs() -> None:
    mgr, a, b = reopened()
    a.assign_epoch(3, a.next_offset)
    a.append(make_batch([b"x" * 50]))
    assert a.local.cache_window is not None and b.local.cache_window is None
    assert a.local.queue._stream is not None and b.local.queue._stream is None
    assert a.epochs.latest_epoch == 3 and b.epochs.entries == [(0, 0)]
    assert a.epochs._epochs is not b.epochs._epochs
    assert sum(map(len, a.read(0, 1 << 20))) > 0 and b.log_end_offset == 0
    mgr.close()


def test_an_idle_log_reopened_costs_under_the_bound() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    idle_logs(fs, clock)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        mgr = manager(fs, clock)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert len(mgr.logs()) == LOGS
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown / LOGS < BYTES_PER_IDLE_LOG, f"{grown / LOGS:.0f} bytes per idle log"
    mgr.close()

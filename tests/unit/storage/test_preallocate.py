"""Blocks reserved ahead of appends (Segment.allocate_for, odradek.log.preallocate.bytes).

On the in-memory file system a reservation is recorded (``MemoryFileSystem.allocated``),
so the rules are checked exactly: every write lands in blocks reserved before it,
a reservation grows with the segment up to the setting, and rolling or closing
gives back what is past the end. On real files the kernel is asked (``st_blocks``):
a reservation changes neither the size nor what is read back, survives a crash
harmlessly, and is given back at the next roll.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.storage.config import LogIo, LogManagerConfig
from odradek.storage.fs import OsFileSystem
from odradek.storage.manager import LogManager
from odradek.storage.segment import MIN_ALLOCATE_AHEAD
from odradek.wire.records import Record, build_batch, decode_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
MiB = 1 << 20


class WatchingFs:
    """Opens through a MemoryFileSystem; records, for every ``.log`` write, whether
    its bytes were already reserved (or below the size) when it was written."""

    def __init__(self, fs: MemoryFileSystem) -> None:
        self.fs = fs
        self.unreserved_writes: list[tuple[str, int, int]] = []
        self.reservations: list[tuple[str, int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)

    def open(self, path: str, **kw: Any) -> Any:
        handle = self.fs.open(path, **kw)
        outer = self

        class Watched:
            def __getattr__(self, name: str) -> Any:
                return getattr(handle, name)

            def pwrite(self, position: int, chunks: Any) -> None:
                end = position + sum(len(c) for c in chunks)
                if path.endswith(".log") and end > outer.fs.allocated(path):
                    outer.unreserved_writes.append((path, position, end))
                handle.pwrite(position, chunks)

            def allocate(self, position: int, length: int) -> None:
                outer.reservations.append((path, position, length))
                handle.allocate(position, length)

        return Watched()


def open_log(ahead: int, **config: Any) -> tuple[Log, MemoryFileSystem, WatchingFs]:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    watching = WatchingFs(fs)
    log = Log.open(watching, "/d/t-0", LogConfig(**config), clock)  # type: ignore[arg-type]
    log.local.io = LogIo(allocate_ahead_bytes=ahead)
    return log, fs, watching


def test_each_append_lands_in_blocks_reserved_before_it_and_the_reservation_grows() -> None:
    log, fs, watching = open_log(4 * MiB)
    path = log.segments[-1].log_path
    log.append(make_batch([b"x" * 100]))
    size = fs.size(path)
    assert fs.allocated(path) == size + MIN_ALLOCATE_AHEAD  # a small segment reserves little
    value = b"v" * 60_000
    while fs.size(path) < 12 * MiB:
        log.append(make_batch([value]))
        size = fs.size(path)
        # never more ahead than the segment holds (at least the minimum), nor the setting
        assert size <= fs.allocated(path) <= size + min(4 * MiB, max(MIN_ALLOCATE_AHEAD, size))
    assert watching.unreserved_writes == []
    # A busy segment reserves the setting at a time: 12 MiB took a few calls,
    # growing 1, 2, 4 MiB ahead and then 4 MiB each.
    lengths = [n for _, _, n in watching.reservations]
    assert len(lengths) <= 7
    assert max(lengths) >= 4 * MiB and lengths[0] < 2 * MiB


def test_rolling_and_closing_give_back_what_is_reserved_past_the_end() -> None:
    log, fs, _ = open_log(4 * MiB, segment_bytes=3 * MiB)
    for _ in range(80):
        log.append(make_batch([b"y" * 60_000]))
    assert len(log.segments) >= 2
    *rolled, active = log.segments
    for seg in rolled:
        assert fs.allocated(seg.log_path) == fs.size(seg.log_path) == seg.size
    assert fs.allocated(active.log_path) > active.size
    assert fs.allocated(active.log_path) <= 3 * MiB  # never past segment.bytes
    log.close()
    assert fs.allocated(active.log_path) == fs.size(active.log_path)


def test_nothing_is_reserved_when_the_setting_is_zero() -> None:
    log, fs, watching = open_log(0)
    for _ in range(20):
        log.append(make_batch([b"z" * 10_000]))
    path = log.segments[-1].log_path
    assert fs.allocated(path) == fs.size(path)
    assert len(watching.unreserved_writes) == 20


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300_000), min_size=1, max_size=40),
       st.sampled_from([0, 64 * 1024, MiB, 8 * MiB]), st.integers(400_000, 4 * MiB))
def test_reservations_stay_bounded_and_never_change_what_is_read(
        sizes: list[int], ahead: int, segment_bytes: int) -> None:
    log, fs, watching = open_log(ahead, segment_bytes=segment_bytes)
    values = [bytes([n % 251]) * size for n, size in enumerate(sizes)]
    for value in values:
        log.append(make_batch([value]))
        *rolled, active = log.segments
        for seg in rolled:
            assert fs.allocated(seg.log_path) == seg.size
        cap = max(segment_bytes, active.size)
        assert active.size <= fs.allocated(active.log_path) <= max(
            active.size, min(cap, active.size + min(ahead, max(MIN_ALLOCATE_AHEAD, active.size))))
    if ahead:
        assert watching.unreserved_writes == []
    read = log.read_records(0, 1 << 30)
    assert [r.value for _, b in decode_batches(read) for r in b] == values


# --------------------------------------------------------------------------- real files

needs_linux = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="Linux only")


def _blocks(path: Path) -> int:
    return path.stat().st_blocks * 512


def _manager(tmp_path: Path, **props: str) -> LogManager:
    props = {"log.dirs": str(tmp_path), **props}
    manager = LogManager(OsFileSystem(), ManualClock(NOW), LogManagerConfig.from_properties(props))
    manager.startup()
    return manager


@needs_linux
def test_a_real_segment_has_its_blocks_before_the_writes_and_gives_them_back_on_roll(
        tmp_path: Path) -> None:
    manager = _manager(tmp_path, **{"odradek.log.preallocate.bytes": str(4 * MiB)})
    log = manager.get_or_create_log("t", 0)
    value = os.urandom(64 * 1024)
    batch = build_batch([Record(0, 0, None, value)])
    for _ in range(48):  # 3 MiB
        log.append(batch)
    seg = Path(log.dir_path) / "00000000000000000000.log"
    size = seg.stat().st_size
    assert size == log.segments[-1].size  # the size is what was written
    reserved_to = log.segments[-1].allocated_end
    assert reserved_to >= size + MIN_ALLOCATE_AHEAD
    if _blocks(seg) <= size + 4096:
        pytest.skip("this file system does not reserve blocks (fallocate KEEP_SIZE)")
    assert _blocks(seg) >= reserved_to // 4096 * 4096  # the kernel holds them
    log.roll()
    assert _blocks(seg) < size + 64 * 1024  # the reservation is gone, every byte kept
    assert seg.stat().st_size == size
    got = decode_batches(b"".join(s.read_bytes() for s in log.read(0, 64 * MiB)))
    assert [r.value for _, records in got for r in records] == [value] * 48
    manager.close()


@needs_linux
def test_a_crash_leaves_a_reservation_that_changes_nothing_read_and_the_next_roll_frees(
        tmp_path: Path) -> None:
    crashed = _manager(tmp_path)
    log = crashed.get_or_create_log("t", 0)
    value = os.urandom(32 * 1024)
    for _ in range(40):
        log.append(build_batch([Record(0, 0, None, value)]))
    log.flush()
    seg = Path(log.dir_path) / "00000000000000000000.log"
    size = seg.stat().st_size
    if _blocks(seg) <= size + 4096:
        pytest.skip("this file system does not reserve blocks (fallocate KEEP_SIZE)")
    # No close: the process "dies" with the reservation in place.
    reopened = _manager(tmp_path)
    log2 = reopened.get_or_create_log("t", 0)
    assert log2.log_end_offset == 40
    assert log2.segments[-1].size == size
    got = decode_batches(b"".join(s.read_bytes() for s in log2.read(0, 64 * MiB)))
    assert [r.value for _, records in got for r in records] == [value] * 40
    log2.append(build_batch([Record(0, 0, None, value)]))
    assert _blocks(seg) > seg.stat().st_size + 4096  # still reserved
    log2.roll()
    assert _blocks(seg) < seg.stat().st_size + 64 * 1024  # given back
    reopened.close()
    crashed.handles.close_all()

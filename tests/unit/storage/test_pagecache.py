"""Drop-behind (storage/pagecache.py): which bytes leave the page cache, when.

The window logic is pure (drops are recorded, not run); the OS seam is checked
against the kernel with ``mincore`` (tests/support/pagecache.py); a log
written through a manager drops what is older than its window and still reads
every byte back.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.common.clock import ManualClock
from odradek.storage.config import LogManagerConfig
from odradek.storage.fs import OsFileSystem
from odradek.storage.manager import LogManager
from odradek.storage.memfs import MemoryFileSystem
from odradek.storage.pagecache import CacheWindow, PageCacheTrimmer
from odradek.wire.records import Record, build_batch, decode_batches
from tests.support.pagecache import resident

MiB = 1 << 20


def _window(window: int, step: int) -> tuple[CacheWindow, list[tuple[str, int, int]]]:
    drops: list[tuple[str, int, int]] = []
    return CacheWindow(window, step, lambda p, a, b: drops.append((p, a, b))), drops


def test_nothing_is_dropped_until_the_window_and_a_step_are_exceeded() -> None:
    win, drops = _window(10, 4)
    win.wrote("a.log", 13)
    assert drops == [] and win.cached_bytes == 13
    win.wrote("a.log", 14)
    assert drops == [("a.log", 0, 4)]
    assert win.cached_bytes == 10


def test_a_drop_spans_rolled_segments_oldest_first_and_never_touches_the_window() -> None:
    win, drops = _window(10, 4)
    win.wrote("a.log", 8)
    win.wrote("b.log", 6)  # a was rolled at 8
    assert drops == [("a.log", 0, 4)]
    win.wrote("b.log", 12)  # 4 left of a, 12 of b: drop a's rest and 2 of b
    assert drops[1:] == [("a.log", 4, 8), ("b.log", 0, 2)]
    assert win.cached_bytes == 10


def test_a_truncated_segment_is_counted_from_its_new_end() -> None:
    win, drops = _window(10, 4)
    win.wrote("a.log", 9)
    win.wrote("a.log", 3)  # a follower truncated the active segment to 3
    assert win.cached_bytes == 3 and drops == []
    win.wrote("a.log", 17)
    assert drops == [("a.log", 0, 7)]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=60),
       st.integers(0, 30), st.integers(1, 10))
def test_drops_are_disjoint_in_order_and_leave_exactly_the_window(
        writes: list[tuple[bool, int]], window: int, step: int) -> None:
    win, drops = _window(window, step)
    ends: dict[str, int] = {}
    path = "s0.log"
    for n, (roll, grow) in enumerate(writes):
        if roll:
            path = f"s{n}.log"
        ends[path] = ends.get(path, 0) + grow
        win.wrote(path, ends[path])
        assert win.cached_bytes <= window + step - 1 or win.cached_bytes == window
    dropped: dict[str, int] = {}
    for p, a, b in drops:
        assert a == dropped.get(p, 0) and b > a  # each file front to back, no overlap
        assert b <= ends[p]
        dropped[p] = b
    assert sum(ends.values()) - sum(dropped.values()) == win.cached_bytes


def test_a_negative_window_tracks_nothing() -> None:
    assert PageCacheTrimmer(MemoryFileSystem(), -1).window_for() is None


def test_the_trimmer_thread_runs_every_drop_and_ignores_files_gone_meanwhile() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/d")
    fs.write_file("/d/a.log", b"x" * 100)
    trimmer = PageCacheTrimmer(fs, 10, 5)
    trimmer.submit("/d/gone.log", 0, 50)  # FileNotFoundError: skipped
    trimmer.submit("/d/a.log", 0, 60)
    trimmer.close()  # runs what was asked, then stops
    assert fs.dropped == [("/d/a.log", 0, 60)]
    assert trimmer.dropped_bytes == 110


def _cached(path: Path, offset: int) -> bool:
    return resident(path, offset)


needs_linux = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="Linux only")


@needs_linux
def test_os_drop_cache_evicts_written_pages_and_keeps_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    data = os.urandom(4 * MiB)
    path.write_bytes(data)
    assert _cached(path, 0)
    OsFileSystem().drop_cache(str(path), 0, 2 * MiB)
    assert not _cached(path, 0) and not _cached(path, 2 * MiB - 4096)
    assert _cached(path, 3 * MiB)
    assert path.read_bytes() == data


@needs_linux
def test_a_log_keeps_its_newest_bytes_cached_and_reads_back_everything(tmp_path: Path) -> None:
    props = {"log.dirs": str(tmp_path), "odradek.log.page.cache.window.bytes": str(MiB),
             "odradek.log.page.cache.retain.bytes": "0"}  # the window always
    manager = LogManager(OsFileSystem(), ManualClock(), LogManagerConfig.from_properties(props))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    value = os.urandom(64 * 1024)
    batch = build_batch([Record(0, 0, None, value)])
    for _ in range(96):  # 6 MiB
        log.append(batch)
    seg = Path(log.dir_path) / "00000000000000000000.log"
    manager.page_cache.close()  # runs every drop asked for, then stops
    size = seg.stat().st_size
    assert not _cached(seg, 0)
    assert _cached(seg, size - 4096)
    read = log.read(0, 64 * MiB)
    got = decode_batches(b"".join(s.read_bytes() for s in read))
    assert [r.value for _, records in got for r in records] == [value] * 96
    manager.close()

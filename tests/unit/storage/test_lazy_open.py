"""Opening after a clean shutdown reads nothing: the active segment is deferred
(its end is the checkpointed recovery point) and loaded before its first append,
roll or truncation; an unclean stop still validates and cuts a torn tail; the
open-file bound holds however many logs are touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import (
    KafkaStorageError,
    Log,
    LogConfig,
    LogManager,
    LogManagerConfig,
    OsFileSystem,
)
from odradek.storage.fs import FileSystem
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=100_000, index_interval_bytes=100)


class CountingFs(OsFileSystem):
    """The real file system, counting whole-file reads and opens by path."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.opened: list[str] = []
        self.synced: list[str] = []

    def read_file(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read_file(path)

    def fsync(self, path: str) -> None:
        self.synced.append(path)
        super().fsync(path)

    def sync_dir(self, path: str) -> None:
        self.synced.append(path)
        super().sync_dir(path)

    def open(self, path: str, *, create: bool = False):  # type: ignore[no-untyped-def]
        self.opened.append(path)
        return super().open(path, create=create)


def _filled(fs: FileSystem, path: str, clock: ManualClock, batches: int) -> tuple[Log, bytes]:
    log = Log.open(fs, path, CONFIG, clock)
    for i in range(batches):
        log.append(make_batch([b"v%d" % i, b"w%d" % i], timestamps=NOW + i))
    data = log.read_records(0, 1 << 20)
    log.flush()
    log.close()
    return log, data


def _reopen_clean(fs: FileSystem, path: str, clock: ManualClock, end: int) -> Log:
    """As the log manager opens a log after a clean shutdown: the recovery point
    checkpointed by the close is the log end."""
    return Log.open(fs, path, CONFIG, clock, clean_shutdown=True, recovery_point=end,
                    high_watermark=end)


def test_clean_open_reads_no_segment_file_and_serves_reads(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    old, data = _filled(OsFileSystem(), path, clock, 50)
    end = old.log_end_offset
    fs = CountingFs()
    log = _reopen_clean(fs, path, clock, end)
    segment_files = [p for p in fs.reads + fs.opened
                     if p.endswith((".log", ".index", ".timeindex"))]
    assert segment_files == []
    assert log.active_segment.deferred
    assert log.log_end_offset == end == 100
    # A read loads what it needs and answers as before the restart.
    assert log.read_records(0, 1 << 20) == data
    tail = log.read_records(60, 1 << 20)
    assert 0 < len(tail) < len(data) and data.endswith(tail)
    assert log.active_segment.deferred  # reads do not load it for appends


def test_an_untouched_log_closes_without_writing_or_syncing(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    _filled(OsFileSystem(), path, clock, 5)
    fs = CountingFs()
    log = _reopen_clean(fs, path, clock, 10)

    class Producers:
        def producer_snapshot(self) -> bytes:
            raise AssertionError("no snapshot is taken of an untouched log")

        def writes_rolled_back(self) -> None:
            pass

    log.attach(Producers())  # type: ignore[arg-type]
    assert log.read_records(0, 1 << 20)
    before = sorted(os.listdir(path))
    log.flush()
    log.close()
    assert fs.synced == []
    assert sorted(os.listdir(path)) == before


def test_first_append_after_clean_open_continues_the_log(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    _, data = _filled(OsFileSystem(), path, clock, 20)
    fs = OsFileSystem()
    log = _reopen_clean(fs, path, clock, 40)
    info = log.append(make_batch([b"new"], timestamps=NOW + 100))
    assert info.first_offset == 40
    assert not log.active_segment.deferred
    log.flush()
    log.close()
    # The indexes written after the deferred load serve a full validation too.
    again = Log.open(fs, path, CONFIG, clock, clean_shutdown=False, recovery_point=0)
    assert again.load_report.truncated_bytes == 0
    assert again.log_end_offset == 41
    assert again.read_records(0, 1 << 20)[: len(data)] == data


def test_a_wrong_checkpointed_end_takes_the_log_offline_before_a_write(
        tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    _filled(OsFileSystem(), path, clock, 10)
    log = _reopen_clean(OsFileSystem(), path, clock, 15)  # the real end is 20
    size = os.path.getsize(log.active_segment.log_path)
    with pytest.raises(KafkaStorageError, match="checkpointed 15"):
        log.append(make_batch([b"x"], timestamps=NOW))
    assert log.offline
    assert os.path.getsize(log.active_segment.log_path) == size  # nothing written
    # The next (unclean) start recovers the log from its files.
    again = Log.open(OsFileSystem(), path, CONFIG, clock, clean_shutdown=False,
                     recovery_point=0)
    assert again.log_end_offset == 20


def test_a_torn_tail_behind_a_clean_marker_is_cut_at_the_first_append(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    old, _ = _filled(OsFileSystem(), path, clock, 10)
    seg = old.segments[-1].log_path
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x01\x00garbage")
    log = _reopen_clean(OsFileSystem(), path, clock, 20)
    info = log.append(make_batch([b"x"], timestamps=NOW))
    assert info.first_offset == 20
    assert b"garbage" not in log.read_records(0, 1 << 20)


def test_unclean_open_still_cuts_a_torn_tail(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    fs = OsFileSystem()
    log = Log.open(fs, path, CONFIG, clock)
    for i in range(10):
        log.append(make_batch([b"v%d" % i], timestamps=NOW + i))
    log.flush()
    recovery_point = log.recovery_point
    log.append(make_batch([b"unflushed" * 10], timestamps=NOW + 20))
    seg = log.segments[-1].log_path
    log.handles.close_all()  # kill -9: no close, no checkpoint
    size = os.path.getsize(seg)
    os.truncate(seg, size - 7)  # the last batch torn
    again = Log.open(fs, path, CONFIG, clock, clean_shutdown=False,
                     recovery_point=recovery_point)
    assert not again.active_segment.deferred
    assert again.load_report.truncated_bytes > 0
    assert again.log_end_offset == 10


def test_open_files_stay_bounded_with_every_log_touched(tmp_path: Path) -> None:
    fs = OsFileSystem()
    clock = ManualClock(NOW)
    config = LogManagerConfig(log_dir=str(tmp_path), max_open_files=16)
    manager = LogManager(fs, clock, config, CONFIG)
    manager.startup()
    for p in range(60):
        log = manager.get_or_create_log("t", p)
        assert log.active_segment.deferred  # a new log keeps no index objects
        log.append(make_batch([b"v"], timestamps=NOW))
        log.flush()
    manager.close()

    before = len(os.listdir("/proc/self/fd"))
    manager = LogManager(fs, clock, config, CONFIG)
    manager.startup()
    assert manager.handles.open_count == 0  # nothing opened by a clean start
    for p in range(60):
        log = manager.get_log("t", p)
        assert log is not None and log.active_segment.deferred
        assert log.log_end_offset == 1
        assert len(log.read_records(0, 1 << 20)) > 0
        log.append(make_batch([b"w"], timestamps=NOW))
        assert manager.handles.open_count <= 16
    assert len(os.listdir("/proc/self/fd")) - before <= 16
    assert manager.handles.evictions > 0
    manager.close()

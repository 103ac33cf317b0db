"""The clean-shutdown summary (storage/summary.py): a clean restart opens every
partition from it, without listing or reading the partition directories, into
the same state a start that lists and reads them reaches; a summary is used only
with the clean-shutdown marker, never twice, and not when damaged."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from odradek.common.clock import ManualClock
from odradek.storage import LogConfig, OsFileSystem
from odradek.storage.config import LogManagerConfig
from odradek.storage.manager import LogManager
from odradek.storage.summary import SUMMARY_FILE, read_summary
from odradek.storage.txnfiles import AbortedEntry, SnapshotEntry, encode_snapshot
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)
ENTRY = AbortedEntry(producer_id=7, first_offset=2, last_offset=5, last_stable_offset=2)
SNAPSHOT = [SnapshotEntry(7, 0, 9, 9, 0, NOW, 0, -1)]


class CountingFs(OsFileSystem):
    """The real file system, noting every path listed, read or sized."""

    def __init__(self) -> None:
        super().__init__()
        self.touched: list[str] = []

    def listdir(self, path: str) -> list[str]:
        self.touched.append(path)
        return super().listdir(path)

    def read_file(self, path: str) -> bytes:
        self.touched.append(path)
        return super().read_file(path)

    def size(self, path: str) -> int:
        self.touched.append(path)
        return super().size(path)


def _manager(fs: OsFileSystem, root: Path) -> LogManager:
    mgr = LogManager(fs, ManualClock(NOW), LogManagerConfig(log_dir=str(root)), CONFIG)
    mgr.startup()
    return mgr


def _fill(root: Path) -> None:
    """Partitions of every kind, closed cleanly: several segments with epochs,
    aborted-transaction entries and a producer snapshot, and an empty one."""
    mgr = _manager(OsFileSystem(), root)
    topic_id = uuid.UUID(int=7)
    busy = mgr.get_or_create_log("busy", 0, topic_id=topic_id)
    for i in range(40):
        if i in (0, 25):
            busy.assign_epoch(1 if i == 0 else 4, busy.log_end_offset)
        busy.append(make_batch([b"v%d" % i] * 3, timestamps=NOW + i))
    busy.append_aborted(ENTRY)
    busy.txn_files.write_snapshot(busy.log_end_offset, encode_snapshot(SNAPSHOT), durable=True)
    busy.advance_high_watermark(busy.log_end_offset)
    mgr.get_or_create_log("busy", 1, topic_id=topic_id)
    mgr.get_or_create_log("idle", 0, topic_id=uuid.UUID(int=8))
    mgr.close()


def _state(mgr: LogManager) -> dict[Any, Any]:
    out = {}
    for (topic, partition), log in sorted(mgr._logs.items()):
        end = log.log_end_offset
        out[topic, partition] = (
            list(log.segment_bases), end, log.log_start_offset, log.high_watermark,
            log.topic_id, log.epochs.entries, log.epochs.loaded,
            log.txn_files.aborted(log.segment_bases), log.txn_files.latest_snapshot(end),
            [s.read_bytes() for s in log.read(0, 1 << 20)] if end else [],
        )
    return out


def _partition_paths(fs: CountingFs, root: Path) -> list[str]:
    return [p for p in fs.touched if p.startswith(str(root) + "/") and
            p[len(str(root)) + 1:].split("/")[0] in {"busy-0", "busy-1", "idle-0"}]


def _listed(fs: CountingFs, root: Path) -> bool:
    """Were the partition directories listed (not taken from a summary)?"""
    return {str(root / d) for d in ("busy-0", "busy-1", "idle-0")} <= set(fs.touched)


def test_a_clean_restart_opens_from_the_summary_into_the_same_state(tmp_path: Path) -> None:
    _fill(tmp_path)
    assert (tmp_path / SUMMARY_FILE).exists()
    fs = CountingFs()
    mgr = _manager(fs, tmp_path)
    from_summary = _state(mgr)
    touched = _partition_paths(fs, tmp_path)
    assert not (tmp_path / SUMMARY_FILE).exists()  # used once: gone before any write
    mgr.close()
    assert from_summary[("busy", 0)][1] == 120 and len(from_summary[("busy", 0)][0]) > 2
    assert from_summary[("busy", 0)][5] == [(1, 0), (4, 75)]

    (tmp_path / SUMMARY_FILE).unlink()  # the same start, listing and reading
    fs_listed = CountingFs()
    mgr = _manager(fs_listed, tmp_path)
    assert _state(mgr) == from_summary
    mgr.close()
    # Only partition.metadata (whose directory it is) and what _state itself
    # read (segment data, transaction files) were touched: no listing, no
    # epochs, no .log size.
    assert not [p for p in touched if p.endswith(("leader-epoch-checkpoint", ".log"))]
    assert not [p for p in touched if p.rsplit("/", 1)[-1] in {"busy-0", "busy-1", "idle-0"}]
    assert len([p for p in touched if p.endswith("partition.metadata")]) == 3
    assert _listed(fs_listed, tmp_path)


def test_a_summary_without_the_clean_shutdown_marker_is_not_used(tmp_path: Path) -> None:
    _fill(tmp_path)
    (tmp_path / ".kafka_cleanshutdown").unlink()  # as after a crash
    fs = CountingFs()
    mgr = _manager(fs, tmp_path)
    assert _listed(fs, tmp_path)
    assert not (tmp_path / SUMMARY_FILE).exists()
    assert mgr.get_log("busy", 0) is not None
    assert mgr.get_log("busy", 0).log_end_offset == 120  # type: ignore[union-attr]
    mgr.close()


def test_a_damaged_summary_is_ignored_and_the_directories_listed(tmp_path: Path) -> None:
    _fill(tmp_path)
    path = tmp_path / SUMMARY_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert read_summary(OsFileSystem(), str(tmp_path)) is None
    fs = CountingFs()
    mgr = _manager(fs, tmp_path)
    assert _listed(fs, tmp_path)
    assert mgr.get_log("busy", 0).log_end_offset == 120  # type: ignore[union-attr]
    mgr.close()


def test_a_directory_the_summary_does_not_name_is_listed(tmp_path: Path) -> None:
    _fill(tmp_path)
    mgr = _manager(OsFileSystem(), tmp_path)  # a start and clean stop with one more
    mgr.get_or_create_log("added", 0, topic_id=uuid.UUID(int=9)).append(
        make_batch([b"x"], timestamps=NOW))
    mgr.close()
    # The summary names it now; one written before it existed does not:
    assert read_summary(OsFileSystem(), str(tmp_path)) is not None
    (tmp_path / SUMMARY_FILE).unlink()
    _fill_summary_without(tmp_path, "added-0")
    fs = CountingFs()
    mgr = _manager(fs, tmp_path)
    assert str(tmp_path / "added-0") in fs.touched  # listed
    assert mgr.get_log("added", 0).log_end_offset == 1  # type: ignore[union-attr]
    assert mgr.get_log("busy", 0).log_end_offset == 120  # type: ignore[union-attr]
    mgr.close()


def _fill_summary_without(root: Path, name: str) -> None:
    from odradek.storage.summary import describe, write_summary

    fs = OsFileSystem()
    dirs = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != name)
    write_summary(fs, str(root), [line for d in dirs
                                  if (line := describe(fs, str(root / d))) is not None])


def test_a_summary_left_by_an_earlier_shutdown_is_not_used(tmp_path: Path) -> None:
    """A version of Odradek that knows no summary leaves the last one in place;
    its own run changed the logs and its clean stop rewrote the checkpoints, so
    the summary no longer matches them and is not used."""
    _fill(tmp_path)
    stale = (tmp_path / SUMMARY_FILE).read_bytes()
    mgr = _manager(OsFileSystem(), tmp_path)
    busy = mgr.get_log("busy", 0)
    assert busy is not None
    for i in range(30):  # rolls new segments the stale summary does not list
        busy.append(make_batch([b"w%d" % i] * 3, timestamps=NOW + i))
    mgr.close()
    (tmp_path / SUMMARY_FILE).write_bytes(stale)  # as the old version left it
    assert read_summary(OsFileSystem(), str(tmp_path)) is None
    fs = CountingFs()
    mgr = _manager(fs, tmp_path)
    assert str(tmp_path / "busy-0") in fs.touched  # listed, not taken from the summary
    assert mgr.get_log("busy", 0).log_end_offset == 210  # type: ignore[union-attr]
    mgr.close()


def test_a_summary_that_cannot_be_read_further_leaves_the_rest_to_the_listing(
        tmp_path: Path) -> None:
    _fill(tmp_path)

    class FailingHandle:
        """The summary's handle: the checks at open read it whole; then reads fail."""

        def __init__(self, handle: Any) -> None:
            self._handle = handle
            self.reads = 0

        def pread(self, position: int, length: int) -> bytes:
            self.reads += 1
            if self.reads > 3:  # the CRC pass, the trailer and the header pass
                raise OSError(5, "Input/output error")
            data: bytes = self._handle.pread(position, length)
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self._handle, name)

    class FailingReads(CountingFs):
        def open(self, path: str, *, create: bool = False) -> Any:
            handle = super().open(path, create=create)
            return FailingHandle(handle) if path.endswith(SUMMARY_FILE) else handle

    fs = FailingReads()
    mgr = _manager(fs, tmp_path)
    assert _listed(fs, tmp_path)
    assert mgr.get_log("busy", 0).log_end_offset == 120  # type: ignore[union-attr]
    mgr.close()

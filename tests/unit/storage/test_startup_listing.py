"""A clean open lists a partition directory once: the transaction files' first look
(aborted entries, producer snapshots) uses that listing, with no listing or
``stat`` of its own, and answers as a fresh listing would; any change to the
directory's files through the log forgets it; an unclean open keeps none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, OsFileSystem
from odradek.storage.fs import FileSystem
from odradek.storage.txnfiles import AbortedEntry, SnapshotEntry, encode_snapshot
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=100_000, index_interval_bytes=100)
ENTRY = AbortedEntry(producer_id=7, first_offset=2, last_offset=5, last_stable_offset=2)
SNAPSHOT = [SnapshotEntry(7, 0, 9, 9, 0, NOW, 0, -1)]


class ListingFs(OsFileSystem):
    """The real file system, counting directory listings and existence checks."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []
        self.probed: list[str] = []

    def listdir(self, path: str) -> list[str]:
        self.listed.append(path)
        return super().listdir(path)

    def exists(self, path: str) -> bool:
        self.probed.append(path)
        return super().exists(path)


def _stopped_cleanly(path: str, clock: ManualClock) -> int:
    """A log of ten records with an aborted-transaction entry and a producer
    snapshot at its end, flushed and closed; returns its end."""
    log = Log.open(OsFileSystem(), path, CONFIG, clock)
    for i in range(10):
        log.append(make_batch([b"v%d" % i], timestamps=NOW + i))
    log.append_aborted(ENTRY)
    log.txn_files.write_snapshot(log.log_end_offset, encode_snapshot(SNAPSHOT), durable=True)
    log.flush()
    log.close()
    return log.log_end_offset


def _reopen(fs: FileSystem, path: str, clock: ManualClock, end: int, *, clean: bool) -> Log:
    return Log.open(fs, path, CONFIG, clock, clean_shutdown=clean, recovery_point=end,
                    high_watermark=end)


def test_first_look_after_a_clean_open_lists_nothing_and_answers_right(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    end = _stopped_cleanly(path, clock)
    fs = ListingFs()
    log = _reopen(fs, path, clock, end, clean=True)
    assert fs.listed == [path]  # the loader's one listing
    assert log.txn_files.listing is not None
    fs.listed.clear()
    fs.probed.clear()
    assert log.txn_files.aborted(log.segment_bases) == [ENTRY]
    assert log.txn_files.latest_snapshot(end) == (end, SNAPSHOT)
    assert fs.listed == [] and fs.probed == []
    log.txn_files.forget_listing()
    assert log.txn_files.aborted(log.segment_bases) == [ENTRY]
    assert log.txn_files.latest_snapshot(end) == (end, SNAPSHOT)
    assert fs.listed == [path]


def test_a_change_to_the_files_forgets_the_listing(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    changes: dict[str, Callable[[Log], object]] = {
        "truncation": lambda log: log.truncate_to(3),
        "deleted records": lambda log: log.delete_records_before(log.log_end_offset),
        "a snapshot written": lambda log: log.txn_files.write_snapshot(
            log.log_end_offset, encode_snapshot([]), durable=False),
        "an aborted entry": lambda log: log.append_aborted(ENTRY),
    }
    for i, (what, change) in enumerate(changes.items()):
        path = str(tmp_path / f"t-{i}")
        end = _stopped_cleanly(path, clock)
        log = _reopen(OsFileSystem(), path, clock, end, clean=True)
        assert log.txn_files.listing is not None, what
        change(log)
        assert log.txn_files.listing is None, what


def test_deleted_records_drop_the_entries_of_deleted_segments(tmp_path: Path) -> None:
    """After a clean open, the entry of a segment DeleteRecords removes is gone
    from the next look, as it would be without the listing."""
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    log = Log.open(OsFileSystem(), path, CONFIG, clock)
    for i in range(6):
        log.append(make_batch([b"v%d" % i], timestamps=NOW + i))
    log.append_aborted(ENTRY)
    log.roll()
    log.append(make_batch([b"late"], timestamps=NOW + 9))
    log.flush()
    log.close()
    end = log.log_end_offset
    again = _reopen(OsFileSystem(), path, clock, end, clean=True)
    assert again.txn_files.aborted(again.segment_bases) == [ENTRY]
    again.delete_records_before(6)
    assert again.txn_files.aborted(again.segment_bases) == []


def test_an_unclean_open_keeps_no_listing(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    path = str(tmp_path / "t-0")
    end = _stopped_cleanly(path, clock)
    log = _reopen(OsFileSystem(), path, clock, end, clean=False)
    assert log.txn_files.listing is None
    assert log.txn_files.aborted(log.segment_bases) == [ENTRY]

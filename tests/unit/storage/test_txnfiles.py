"""The .txnindex and producer-snapshot formats (storage/txnfiles.py)."""

from __future__ import annotations

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import MemoryFileSystem
from odradek.storage.txnfiles import (
    AbortedEntry,
    SnapshotEntry,
    SnapshotError,
    TxnFiles,
    encode_entry,
    encode_snapshot,
    parse_entries,
    parse_snapshot,
)


def test_txnindex_entries_round_trip_and_a_torn_tail_is_ignored() -> None:
    entries = [AbortedEntry(5, 0, 3, 4), AbortedEntry(9, 2, 7, 8)]
    data = b"".join(encode_entry(e) for e in entries)
    assert len(data) == 68
    assert parse_entries(data) == entries
    assert parse_entries(data + b"\x00\x00\x01") == entries
    assert parse_entries(data[:50]) == entries[:1]


def test_snapshots_round_trip_and_refuse_damage() -> None:
    entries = [SnapshotEntry(5, 1, 9, 100, 3, 1_700_000_000_000, 0, -1),
               SnapshotEntry(6, 0, -1, -1, 0, -1, 2, 40)]
    data = encode_snapshot(entries)
    assert len(data) == 6 + 4 + 2 * 46
    assert parse_snapshot(data) == entries
    damaged = bytearray(data)
    damaged[20] ^= 1
    with pytest.raises(SnapshotError, match="CRC"):
        parse_snapshot(bytes(damaged))
    with pytest.raises(SnapshotError):
        parse_snapshot(data[:-1])


def test_truncation_drops_entries_and_snapshots_at_or_above_the_log_end() -> None:
    fs = MemoryFileSystem(ManualClock(0))
    fs.makedirs("/d/t-0")
    files = TxnFiles(fs, "/d/t-0")
    files.append_aborted(0, AbortedEntry(5, 0, 3, 4))
    files.append_aborted(0, AbortedEntry(6, 4, 9, 10))
    files.write_snapshot(4, encode_snapshot([]), durable=True)
    files.write_snapshot(10, encode_snapshot([]), durable=False)
    files.write_snapshot(12, encode_snapshot([]), durable=False)
    assert files.snapshot_offsets() == [10, 12]  # only the newest two are kept
    files.truncate_from_end(9, [0])
    assert files.aborted([0]) == [AbortedEntry(5, 0, 3, 4)]
    assert files.snapshot_offsets() == []
    assert files.latest_snapshot(100) is None

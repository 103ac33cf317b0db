"""Reads: slices of whole batches for sendfile, KIP-74, the high watermark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import FileSlice, Log, LogConfig, OffsetOutOfRangeError, OsFileSystem
from odradek.wire.batch import iter_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = Log.open(
        OsFileSystem(), str(tmp_path / "t-0"), LogConfig(segment_bytes=500), ManualClock(NOW)
    )
    for i in range(12):
        log.append(make_batch([b"v" * 30] * (1 + i % 3), timestamps=NOW + i))
    return log


def test_slices_are_whole_batches_from_the_batch_holding_the_offset(log: Log) -> None:
    for offset in range(log.log_end_offset):
        data = log.read_records(offset, 10_000)
        first = iter_batches(data)[0][1]
        assert first.base_offset <= offset <= first.last_offset


def test_slices_can_be_sent_from_the_file_descriptor(log: Log) -> None:
    slices = log.read(0, 10_000)
    assert len(slices) == len(log.segments)  # one contiguous range per segment
    sent = b""
    for s in slices:
        fd = os.open(s.path, os.O_RDONLY)
        try:
            sent += os.pread(fd, s.length, s.position)
        finally:
            os.close(fd)
    assert sent == log.read_bytes(slices)
    iter_batches(sent)


def test_max_bytes_cuts_at_a_batch_boundary_but_returns_one_batch(log: Log) -> None:
    one = log.read(0, 1)
    assert len(one) == 1 and len(iter_batches(log.read_bytes(one))) == 1  # KIP-74
    assert log.read(0, 1, min_one_batch=False) == []
    sizes = [h.size for _, h in iter_batches(log.read_records(0, 10_000))]
    for budget in range(0, 400, 13):
        got = log.read_bytes(log.read(0, budget, min_one_batch=False))
        total = 0
        for size in sizes:
            if total + size > budget:
                break
            total += size
        assert len(got) == total


def test_high_watermark_limit(log: Log) -> None:
    log.advance_high_watermark(5)
    data = log.read_records(0, 10_000, max_offset=log.high_watermark)
    assert max(h.last_offset for _, h in iter_batches(data)) < 5
    assert log.read(5, 10_000, max_offset=5) == []


def test_offsets_out_of_range(log: Log) -> None:
    assert log.read(log.log_end_offset, 100) == []
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(log.log_end_offset + 1, 100)
    assert e.value.error_code == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_file_slice_fields(log: Log) -> None:
    (s,) = log.read(2, 1)
    assert isinstance(s, FileSlice) and s.path.endswith("00000000000000000000.log")
    assert s.first_offset == 1  # the batch holding offset 2 starts at 1


def _scanned(seg: object, offset: int) -> object:
    """find_batch through the offset index and the headers alone (the tail off)."""
    tail = seg._tail  # type: ignore[attr-defined]
    end = tail.end
    tail.end = -2
    try:
        return seg.find_batch(offset)  # type: ignore[attr-defined]
    finally:
        tail.end = end


@pytest.mark.parametrize("opened", [False, True])
def test_the_in_memory_tail_finds_what_the_index_and_headers_find(
        tmp_path: Path, opened: bool) -> None:
    """More appends than the tail holds, a truncation, appends after it, and (once)
    a reopened log whose active segment starts its tail mid-file."""
    path = str(tmp_path / "t-0")
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=256)
    log = Log.open(OsFileSystem(), path, config, ManualClock(NOW))
    for i in range(700):
        log.append(make_batch([b"v" * (i % 50)] * (1 + i % 4), timestamps=NOW + i))
    if opened:
        log.close()
        log = Log.open(OsFileSystem(), path, config, ManualClock(NOW))
        log.append(make_batch([b"w"] * 3, timestamps=NOW))
    log.truncate_to(log.log_end_offset - 40)
    for i in range(30):
        log.append(make_batch([b"x" * i] * (1 + i % 3), timestamps=NOW + i))
    seg = log.segments[-1]
    assert seg._tail.lasts  # the tail is in use
    for offset in range(seg.base_offset, log.log_end_offset + 2):
        assert seg.find_batch(offset) == _scanned(seg, offset), offset

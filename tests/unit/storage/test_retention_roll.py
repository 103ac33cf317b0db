"""Rolling and retention on simulated time."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import (
    InvalidRecordError,
    Log,
    LogConfig,
    MemoryFileSystem,
    OffsetOutOfRangeError,
)
from odradek.wire.batch import iter_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


def open_log(**config: object) -> tuple[Log, MemoryFileSystem, ManualClock]:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    log = Log.open(fs, "/d/t-0", LogConfig(**config), clock)  # type: ignore[arg-type]
    return log, fs, clock


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_roll_by_segment_bytes() -> None:
    log, _, _ = open_log(segment_bytes=300)
    for _ in range(10):
        log.append(make_batch([b"x" * 40]))  # 109 bytes each
    assert bases(log) == [0, 2, 4, 6, 8]
    assert all(s.size <= 300 for s in log.segments)


def test_roll_by_segment_ms_uses_the_first_batch_timestamp() -> None:
    minute = 60_000
    log, _, clock = open_log(segment_ms=minute)
    log.append(make_batch([b"a"], timestamps=NOW))
    log.append(make_batch([b"b"], timestamps=NOW + minute))  # exactly segment.ms: no roll
    assert bases(log) == [0]
    log.append(make_batch([b"c"], timestamps=NOW + minute + 1))
    assert bases(log) == [0, 2]
    # Kafka's rule: the batch timestamps decide, not the wall clock.
    clock.advance(10 * minute)
    log.append(make_batch([b"d"], timestamps=NOW + minute + 2))
    assert bases(log) == [0, 2]


def test_roll_by_segment_ms_without_timestamps_uses_creation_time() -> None:
    log, _, clock = open_log(segment_ms=HOUR)
    log.append(make_batch([b"a"], timestamps=-1))
    clock.advance(HOUR)
    log.append(make_batch([b"b"], timestamps=-1))
    assert bases(log) == [0]
    clock.advance(1)
    log.append(make_batch([b"c"], timestamps=-1))
    assert bases(log) == [0, 2]


def test_roll_when_an_index_is_full() -> None:
    # 3 offset-index entries, an entry before every batch after the first.
    log, _, _ = open_log(segment_index_bytes=24, index_interval_bytes=0)
    for i in range(8):
        log.append(make_batch([b"x"], timestamps=NOW + i))
    for seg in log.segments:
        assert len(seg.offset_index()) <= 3 and len(seg.time_index()) <= 2
    assert len(log.segments) > 1


def test_roll_before_relative_offsets_overflow() -> None:
    log, _, _ = open_log()
    log.append(make_batch([b"x"]))
    # A compressed batch claiming 2**31 records (storage does not decompress).
    huge = make_batch([b"y"], attributes=1, last_offset_delta=2**31 - 2, records_count=2**31 - 1)
    assert log.append(huge).last_offset == 2**31 - 1  # relative offset 2**31 - 1 still fits
    assert bases(log) == [0]
    log.append(make_batch([b"z"]))  # offset 2**31 does not fit a 32-bit relative offset
    assert bases(log) == [0, 2**31]


def test_uncompressed_record_count_must_fit_the_bytes() -> None:
    log, _, _ = open_log()
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([b"x"], last_offset_delta=99, records_count=100))


def test_a_rolled_segment_makes_a_flush_due() -> None:
    log, _, _ = open_log(segment_bytes=200)
    log.append(make_batch([b"x" * 40]))
    assert not log.flush_due()
    info = log.append(make_batch([b"x" * 40]))
    assert info.flush_due and len(log.segments) == 2
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_retention_ms_deletes_whole_old_segments_below_the_high_watermark() -> None:
    log, fs, clock = open_log(segment_bytes=300, retention_ms=HOUR, file_delete_delay_ms=0)
    for i in range(10):
        log.append(make_batch([b"x" * 40], timestamps=NOW + i * 1000))
    log.advance_high_watermark(6)
    clock.advance(HOUR + 4_000)  # segments whose newest record is older than 1 hour go
    assert log.delete_old_segments() == 2
    assert bases(log) == [4, 6, 8] and log.log_start_offset == 4
    clock.advance(HOUR)
    log.delete_old_segments()
    # Segment 4-5 ends at the HW (6) and goes; 6-7 holds offsets at the HW: kept.
    assert bases(log) == [6, 8] and log.log_start_offset == 6
    assert sorted(p for p in fs.walk_files() if p.endswith(".log")) == [
        "/d/t-0/00000000000000000006.log",
        "/d/t-0/00000000000000000008.log",
    ]


def test_retention_rolls_and_empties_a_fully_expired_log() -> None:
    log, _, clock = open_log(retention_ms=HOUR, file_delete_delay_ms=0)
    for _ in range(3):
        log.append(make_batch([b"x"], timestamps=NOW))
    log.advance_high_watermark(3)
    clock.advance(HOUR + 1)
    assert log.delete_old_segments() == 1
    assert bases(log) == [3]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (3, 3, 3)
    assert log.active_segment.size == 0
    log.append(make_batch([b"y"], timestamps=clock.now_ms()))
    assert log.read_records(3, 100)


def test_retention_bytes_keeps_at_least_the_limit() -> None:
    log, _, _ = open_log(segment_bytes=300, retention_bytes=500, file_delete_delay_ms=0)
    for _ in range(10):
        log.append(make_batch([b"x" * 40]))  # 5 segments of 218 bytes: 2 go, 654 bytes stay
    log.advance_high_watermark(10)
    log.delete_old_segments()
    assert log.size_bytes >= 500
    assert log.size_bytes - log.segments[0].size < 500
    assert bases(log) == [4, 6, 8]


def test_retention_never_deletes_at_or_above_the_high_watermark() -> None:
    log, _, _ = open_log(segment_bytes=300, retention_bytes=0, file_delete_delay_ms=0)
    for _ in range(10):
        log.append(make_batch([b"x" * 40]))
    log.advance_high_watermark(5)
    log.delete_old_segments()
    assert bases(log) == [4, 6, 8]


def test_deleted_segments_linger_for_file_delete_delay_ms() -> None:
    log, fs, clock = open_log(segment_bytes=300, retention_bytes=0, file_delete_delay_ms=60_000)
    for _ in range(6):
        log.append(make_batch([b"x" * 40]))
    log.advance_high_watermark(4)
    log.delete_old_segments()
    deleted = sorted(p for p in fs.walk_files() if p.endswith(".deleted"))
    assert deleted == [
        "/d/t-0/00000000000000000000.index.deleted",
        "/d/t-0/00000000000000000000.log.deleted",
        "/d/t-0/00000000000000000000.timeindex.deleted",
        "/d/t-0/00000000000000000002.index.deleted",
        "/d/t-0/00000000000000000002.log.deleted",
        "/d/t-0/00000000000000000002.timeindex.deleted",
    ]
    clock.advance(59_999)
    assert log.local.deletes.run_due(clock.monotonic_ms()) == clock.monotonic_ms() + 1
    clock.advance(1)
    assert log.local.deletes.run_due(clock.monotonic_ms()) is None
    assert not any(p.endswith(".deleted") for p in fs.walk_files())


def test_delete_records_moves_the_start_and_drops_whole_segments() -> None:
    log, _, _ = open_log(segment_bytes=300, file_delete_delay_ms=0)
    for _ in range(6):
        log.append(make_batch([b"x" * 40]))
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(1)  # above the HW (0)
    log.advance_high_watermark(6)
    assert log.delete_records_before(3) == 3
    assert bases(log) == [2, 4]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    first = iter_batches(log.read_records(3, 1000))[0][1]
    assert first.base_offset == 3
    assert log.delete_records_before(1) == 3  # never back


def test_update_config_applies_to_the_next_append() -> None:
    log, _, _ = open_log()
    log.append(make_batch([b"x" * 40]))
    log.update_config(dataclasses.replace(log.config, segment_bytes=150))
    log.append(make_batch([b"x" * 40]))
    assert bases(log) == [0, 1]

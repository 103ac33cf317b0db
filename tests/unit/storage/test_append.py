"""Append: validation, offset assignment, LogAppendTime, what lands in the file."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.common.clock import ManualClock
from odradek.storage import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    LogConfig,
    MemoryFileSystem,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from odradek.wire.batch import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, iter_batches, read_batch_header
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


def open_log(**config: object) -> tuple[Log, MemoryFileSystem, ManualClock]:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    log = Log.open(fs, "/d/topic-3", LogConfig(**config), clock)  # type: ignore[arg-type]
    return log, fs, clock


def test_offsets_are_assigned_and_bytes_kept() -> None:
    log, fs, _ = open_log()
    a = make_batch([b"a", b"b", b"c"], timestamps=NOW, base_offset=999)
    b = make_batch([b"d"], timestamps=NOW + 5)
    info = log.append(a + b)
    assert (info.first_offset, info.last_offset, info.records, info.batches) == (0, 3, 4, 2)
    assert info.log_append_time_ms == -1 and info.max_timestamp == NOW + 5
    data = fs.read_file("/d/topic-3/00000000000000000000.log")
    assert data[8 : len(a)] == a[8:]
    (_p0, h0), (p1, h1) = iter_batches(data)
    assert (h0.base_offset, h1.base_offset) == (0, 3)
    assert data[p1 + 8 :] == b[8:]
    assert log.log_end_offset == 4
    info = log.append(b)
    assert info.first_offset == 4


def test_leader_epoch_is_written_outside_the_crc() -> None:
    log, _, _ = open_log()
    log.append(make_batch([b"x"]), leader_epoch=12)
    stored = log.read_records(0, 1000)
    assert struct.unpack_from(">i", stored, 12)[0] == 12
    iter_batches(stored)  # still valid


def test_log_append_time_rewrites_max_timestamp_and_crc() -> None:
    log, _, clock = open_log(message_timestamp_type="LogAppendTime")
    clock.advance(1234)
    info = log.append(make_batch([b"x", b"y"], timestamps=5))
    assert info.log_append_time_ms == NOW + 1234
    stored = log.read_records(0, 1000)
    ((_, h),) = iter_batches(stored)  # CRC recomputed
    assert h.max_timestamp == NOW + 1234 and h.attributes & ATTR_TIMESTAMP_TYPE
    assert log.list_offsets(NOW).offset == 0


def test_stored_batches_decode_with_kafka_python() -> None:
    log, _, _ = open_log()
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(5):
        builder.append(i, timestamp=NOW + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    log.append(make_batch([b"first"]))
    log.append(bytes(builder.build()))
    stored = log.read_records(1, 1 << 20)
    batch = DefaultRecordBatch(stored)
    assert batch.validate_crc()
    assert batch.base_offset == 1
    assert [(r.offset, r.value) for r in batch] == [(1 + i, b"v%d" % i) for i in range(5)]


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda b: b[:-1], CorruptRecordError),  # short
        (lambda b: b[:17] + bytes([b[17] ^ 1]) + b[18:], CorruptRecordError),  # CRC
        (lambda b: b[:16] + b"\x01" + b[17:], CorruptRecordError),  # magic 1
        (lambda b: b[:8] + struct.pack(">i", 10) + b[12:], CorruptRecordError),  # length
        (lambda b: b + b"\x00" * 5, CorruptRecordError),  # trailing junk
    ],
)
def test_bad_framing_is_refused_and_nothing_written(mutate, error) -> None:  # type: ignore[no-untyped-def]
    log, fs, _ = open_log()
    log.append(make_batch([b"ok"]))
    size = fs.size("/d/topic-3/00000000000000000000.log")
    with pytest.raises(error):
        log.append(mutate(make_batch([b"x", b"y"])))
    assert fs.size("/d/topic-3/00000000000000000000.log") == size
    assert log.log_end_offset == 1


def test_one_bad_batch_rejects_the_whole_append() -> None:
    log, _, _ = open_log()
    good = make_batch([b"x"])
    bad = bytearray(make_batch([b"y"]))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(good + bytes(bad))
    assert log.log_end_offset == 0


def test_offset_delta_must_match_record_count() -> None:
    log, _, _ = open_log()
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([b"x", b"y"], last_offset_delta=5))
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([b"x", b"y"], records_count=3))
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([], records_count=0, last_offset_delta=0))


def test_client_rules_from_kafkas_validator() -> None:
    log, _, _ = open_log()
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([b"x"], attributes=ATTR_CONTROL))
    with pytest.raises(InvalidRecordError):
        log.append(make_batch([b"x"], producer_id=7, base_sequence=-1))
    log.append(make_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=0))


def test_size_limits() -> None:
    log, _, _ = open_log(max_message_bytes=200, segment_bytes=500)
    log.append(make_batch([b"x" * 100]))
    with pytest.raises(RecordTooLargeError) as e:
        log.append(make_batch([b"x" * 200]))
    assert e.value.error_code == 10
    with pytest.raises(RecordListTooLargeError):
        log.append(b"".join(make_batch([b"y" * 100]) for _ in range(4)))


def test_timestamp_bounds() -> None:
    log, _, _ = open_log(message_timestamp_after_max_ms=1000, message_timestamp_before_max_ms=5000)
    log.append(make_batch([b"x"], timestamps=NOW + 1000))
    with pytest.raises(InvalidTimestampError):
        log.append(make_batch([b"x"], timestamps=NOW + 1001))
    with pytest.raises(InvalidTimestampError):
        log.append(make_batch([b"x"], timestamps=NOW - 5001))


def test_empty_records_append_nothing() -> None:
    log, _, _ = open_log()
    info = log.append(b"")
    assert info.first_offset == -1 and log.log_end_offset == 0


def test_replicated_appends_keep_offsets_and_may_leave_gaps_but_never_go_back() -> None:
    log, _, _ = open_log()
    log.append_replicated(make_batch([b"a", b"b"], base_offset=0, timestamps=5))
    with pytest.raises(CorruptRecordError):
        log.append_replicated(make_batch([b"c"], base_offset=1))  # overlaps offset 1
    info = log.append_replicated(make_batch([b"c"], base_offset=2, timestamps=9))
    assert (info.first_offset, info.last_offset) == (2, 2)
    h = read_batch_header(log.read_records(2, 100))
    assert h.base_offset == 2 and h.max_timestamp == 9
    # A compacted leader leaves gaps: offsets 3..6 are gone, 7 follows.
    info = log.append_replicated(make_batch([b"d"], base_offset=7))
    assert (info.first_offset, log.log_end_offset) == (7, 8)
    assert read_batch_header(log.read_records(3, 100)).base_offset == 7


def test_replicated_appends_ignore_max_message_bytes() -> None:
    """The leader accepted the batch: a follower with a lower limit copies it (Kafka)."""
    log, _, _ = open_log(max_message_bytes=100)
    info = log.append_replicated(make_batch([b"x" * 500], base_offset=0))
    assert (info.first_offset, log.log_end_offset) == (0, 1)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch([b"x" * 500]))

"""On-disk formats byte for byte: what Kafka's tools expect to find."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, LogManager, LogManagerConfig, OsFileSystem
from odradek.storage.checkpoint import (
    format_offsets,
    format_partition_metadata,
    kafka_uuid_string,
    parse_offsets,
    parse_partition_metadata,
)
from odradek.storage.names import parse_partition_dir_name, segment_file_name
from odradek.wire.batch import iter_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


def test_segment_names_are_twenty_digits() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(2**63 - 1, ".index") == "09223372036854775807.index"


def test_partition_dir_names() -> None:
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir_name("a.b_c-0") == ("a.b_c", 0)
    for bad in ("topic", "topic-", "t-01", "t-0.abc-delete", "t-0-future", "t-x"):
        assert parse_partition_dir_name(bad) is None


def test_checkpoint_text() -> None:
    data = format_offsets({("b", 1): 42, ("a", 0): 7})
    assert data == b"0\n2\na 0 7\nb 1 42\n"
    assert parse_offsets(data) == {("a", 0): 7, ("b", 1): 42}
    assert parse_offsets(b"0\n0\n") == {}


def test_partition_metadata_text() -> None:
    topic_id = uuid.UUID("00000000-0000-0000-0000-000000000001")
    assert kafka_uuid_string(topic_id) == "AAAAAAAAAAAAAAAAAAAAAQ"
    data = format_partition_metadata(topic_id)
    assert data == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert parse_partition_metadata(data) == topic_id


def test_files_on_disk_follow_kafkas_layout(tmp_path: Path) -> None:
    """Every .index entry names the last offset of the batch at its position (what
    DumpLogSegments verifies), every .timeindex entry the batch holding its timestamp,
    and the .log file is plain batches kafka-python decodes."""
    clock = ManualClock(NOW)
    mgr = LogManager(
        OsFileSystem(),
        clock,
        LogManagerConfig(log_dir=str(tmp_path)),
        LogConfig(segment_bytes=2000, index_interval_bytes=150),
    )
    mgr.startup()
    log = mgr.get_or_create_log("orders", 3, topic_id=uuid.uuid4())
    for i in range(60):
        log.append(make_batch([b"v%d" % i] * (1 + i % 4), timestamps=NOW + (i * 37) % 500))
    log.advance_high_watermark(log.log_end_offset)
    mgr.close()
    part = tmp_path / "orders-3"
    names = sorted(p.name for p in part.iterdir())
    assert "partition.metadata" in names
    assert {p.name for p in tmp_path.iterdir()} == {
        ".kafka_cleanshutdown",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-dir-summary",  # Odradek's own (storage/summary.py); Kafka lists only directories
        "orders-3",
    }
    logs = [n for n in names if n.endswith(".log")]
    assert len(logs) > 2
    for name in logs:
        base = int(name[:20])
        data = (part / name).read_bytes()
        batches = iter_batches(data)
        assert batches[0][1].base_offset == base
        by_pos = {p: h for p, h in batches}
        index = (part / name.replace(".log", ".index")).read_bytes()
        entries = [struct.unpack_from(">ii", index, i) for i in range(0, len(index), 8)]
        assert entries, name
        for rel, pos in entries:
            assert by_pos[pos].last_offset == base + rel
        tindex = (part / name.replace(".log", ".timeindex")).read_bytes()
        tentries = [struct.unpack_from(">qi", tindex, i) for i in range(0, len(tindex), 12)]
        running = -1
        first_reaching = {}
        for _, h in batches:
            if h.max_timestamp > running:
                running = h.max_timestamp
                first_reaching[running] = h.last_offset
        for ts, rel in tentries:
            assert first_reaching[ts] == base + rel
        assert tentries[-1][0] == running  # the segment's newest timestamp ends the file
        for pos, h in batches:
            decoded = DefaultRecordBatch(data[pos : pos + h.size])
            assert decoded.validate_crc()
            assert [r.offset for r in decoded] == list(range(h.base_offset, h.next_offset))


def test_reopen_reads_what_was_written(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    fs = OsFileSystem()
    log = Log.open(fs, str(tmp_path / "t-0"), LogConfig(segment_bytes=300), clock)
    for i in range(10):
        log.append(make_batch([b"%d" % i], timestamps=NOW + i))
    before = log.read_records(0, 1 << 20)
    log.flush()
    log.close()
    log = Log.open(
        fs,
        str(tmp_path / "t-0"),
        LogConfig(segment_bytes=300),
        clock,
        clean_shutdown=True,
        recovery_point=10,
    )
    assert log.read_records(0, 1 << 20) == before
    assert log.list_offsets(NOW + 5).offset == 5

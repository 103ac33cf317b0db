"""Damaged files on disk: the real broker starts, serves every record outside the
damage exactly once, hands out fresh offsets, and names the damage.

Each case writes a topic through a real ``odradek serve`` (several segments),
stops it cleanly or with kill -9, damages files, and starts the broker again.
Damage is placed from a seed (printed on failure through the test id) so a
failure replays.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.storage.checkpoint import read_offsets
from odradek.storage.fs import OsFileSystem
from odradek.testing.broker import Broker
from odradek.wire.batch import iter_batches
from tests.support.process import ServerProcess

RECORDS = 6000
SEGMENT_BYTES = 60_000


def produce(bootstrap: str, topic: str, start: int, count: int, *, batch_bytes: int = 8192) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                         "batch.size": batch_bytes, "enable.idempotence": True})
    failed: list[object] = []
    for i in range(start, start + count):
        producer.produce(topic, f"record-{i:06d}".encode() * 3, partition=0,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed


def read_all(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes]], list[str]]:
    """(offset, value) of every record readable from offset 0, and the errors seen;
    stops at the high watermark, or after errors that do not go away."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False, "check.crcs": True})
    out: list[tuple[int, bytes]] = []
    errors: list[str] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    errors.append(str(m.error()))
                    continue
                out.append((m.offset(), m.value()))
            if len(errors) >= 5:
                break
    finally:
        consumer.close()
    return out, errors


def value(i: int) -> bytes:
    return f"record-{i:06d}".encode() * 3


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Path]:
    """A data directory whose topic ``t`` holds RECORDS records over several segments."""
    server = ServerProcess(tmp_path, f"log.segment.bytes={SEGMENT_BYTES}", "num.partitions=1")
    server.start()
    try:
        produce(server.bootstrap, "t", 0, RECORDS)
    except BaseException:
        server.kill()
        raise
    yield tmp_path
    server.kill()


def segments(data: Path) -> list[Path]:
    return sorted((data / "t-0").glob("*.log"))


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch of a segment file."""
    return [(p, h.base_offset, h.last_offset) for p, h in iter_batches(path.read_bytes())]


def flip(path: Path, position: int, count: int = 16) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        old = f.read(count)
        f.seek(position)
        f.write(bytes(b ^ 0xFF for b in old))


@pytest.mark.parametrize("interval_ms", [200, 60_000], ids=["interval-200ms", "default-60s"])
def test_kill_9_after_a_checkpoint_recovers_only_the_tail(
    tmp_path: Path, interval_ms: int
) -> None:
    """With the default 60 s interval only the checkpoint written after each
    rolled segment's fsync can bring the recovery point up in time."""
    server = ServerProcess(tmp_path, f"log.segment.bytes={SEGMENT_BYTES}", "num.partitions=1",
                           f"log.flush.offset.checkpoint.interval.ms={interval_ms}")
    server.start()
    try:
        produce(server.bootstrap, "t", 0, RECORDS)
        active = segments(tmp_path)[-1]
        active_base = int(active.stem)
        checkpoint = str(tmp_path / "recovery-point-offset-checkpoint")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the rolled segments are fsynced and checkpointed
            if os.path.exists(checkpoint):
                points = read_offsets(OsFileSystem(), checkpoint)
                if points.get(("t", 0), -1) >= active_base:
                    break
            time.sleep(0.05)
        else:
            pytest.fail(f"recovery point never reached the active segment at {active_base}")
        produce(server.bootstrap, "t", RECORDS, 100, batch_bytes=200)  # an unflushed tail
    finally:
        server.kill()
    point = read_offsets(OsFileSystem(), str(tmp_path / "recovery-point-offset-checkpoint"))
    rp = point[("t", 0)]
    files = segments(tmp_path)
    total_batches = sum(len(batch_positions(s)) for s in files)
    # Batches in the segment holding the checkpointed recovery point and after it.
    first = max(i for i, f in enumerate(files) if int(f.stem) <= rp)
    tail_batches = sum(len(batch_positions(f)) for f in files[first:])
    with Broker(data_dir=str(tmp_path)) as broker:
        assert broker.app.partitions is not None
        log = broker.app.partitions.logs.get_log("t", 0)
        assert log is not None
        report = log.load_report
        assert not report.clean
        # Only the tail past the recovery point was validated, not the whole log.
        assert 0 < report.validated_batches <= tail_batches
        assert first >= len(files) - 2 and total_batches - tail_batches >= 20
        got, errors = read_all(broker.bootstrap_servers, "t")
    assert not errors
    assert [v for _, v in got] == [value(i) for i in range(RECORDS + 100)]

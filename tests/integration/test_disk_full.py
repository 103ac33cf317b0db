"""A full disk, for real: the broker's data directory on a small tmpfs.

Producers get KAFKA_STORAGE_ERROR while the disk is full, consumers keep
reading what is there, producing resumes once space is freed, with no restart,
and every acknowledged record is readable afterwards, once and in order (also
after a restart). Needs root to mount the tmpfs; skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.records import Record, build_batch
from tests.support.rawclient import RawClient

TMPFS_MB = 24


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs",
                           str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def raw_produce(client: RawClient, value: bytes) -> int:
    batch = build_batch([Record(0, 0, None, value)])
    resp = client.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="t", partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
    return int(resp.responses[0].partition_responses[0].error_code)


def read_values(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "r",
                         "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=10)
        consumer.assign([TopicPartition("t", 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < high and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
        assert [o for o, _ in out] == list(range(high))  # once each, in order
        return [v for _, v in out]
    finally:
        consumer.close()


def test_full_disk_then_space_freed_without_a_restart(small_disk: Path) -> None:
    data = small_disk / "data"
    config = {"log.segment.bytes": str(2 << 20), "num.partitions": "1"}
    acked: list[bytes] = []
    with Broker(data_dir=str(data), **config) as broker:
        broker.create_topic("t", partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 2000})
        failed: list[str] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(str(err))

        for i in range(2000):
            producer.produce("t", f"before-{i:05d}".encode() * 20, on_delivery=on_delivery)
        assert producer.flush(30) == 0 and not failed
        # Fill the disk, leaving less than a segment's worth.
        filler = small_disk / "filler"
        with filler.open("wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        raw = RawClient(broker.bootstrap_servers)
        deadline = time.monotonic() + 30
        codes = []
        while time.monotonic() < deadline:  # what is left fills up; then every append fails
            codes.append(raw_produce(raw, b"x" * 50_000))
            if codes[-3:] == [ErrorCode.KAFKA_STORAGE_ERROR] * 3:
                break
        assert codes[-3:] == [ErrorCode.KAFKA_STORAGE_ERROR] * 3, codes[-5:]
        for i in range(50):  # librdkafka retries storage errors until its timeout
            producer.produce("t", f"full-{i:03d}".encode() * 2000, on_delivery=on_delivery)
        producer.flush(10)
        # Each either failed after librdkafka's retries or was written and acked.
        assert failed and len(failed) + len(acked) == 2050
        # Consumers keep reading what is there (raw writes that were accepted count too).
        values = read_values(broker.bootstrap_servers)
        assert [v for v in values if v.startswith(b"before-")] == acked[:2000]
        filler.unlink()
        deadline = time.monotonic() + 10
        while raw_produce(raw, b"back") != 0:  # resumes with no restart
            assert time.monotonic() < deadline, "appends did not resume after space was freed"
            time.sleep(0.1)
        failed.clear()
        for i in range(100):
            producer.produce("t", f"after-{i:05d}".encode(), on_delivery=on_delivery)
        assert producer.flush(30) == 0 and not failed
        raw.close()
        values = read_values(broker.bootstrap_servers)
        ours = [v for v in values if v.startswith((b"before-", b"after-", b"full-"))]
        assert ours == acked  # every acknowledged record, once, in order
    with Broker(data_dir=str(data), **config) as broker:  # and after a restart
        again = read_values(broker.bootstrap_servers)
        assert again == values

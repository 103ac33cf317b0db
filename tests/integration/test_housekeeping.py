"""The broker's housekeeping: retention runs, a clean stop leaves Kafka's marker files."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker
from tests.support.process import ServerProcess


def _low_high(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low, high
    finally:
        c.close()


def test_retention_by_time_deletes_old_segments_but_never_the_active_one() -> None:
    with Broker(**{"log.retention.check.interval.ms": "50"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        config = {"retention.ms": "60000", "segment.bytes": "1024", "file.delete.delay.ms": "0"}
        admin.create_topics([NewTopic("old", 1, 1, config=config)])["old"].result(10)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(60):  # records from 1970: far past retention.ms
            producer.produce("old", b"x" * 100, partition=0, timestamp=1000 + i)
            producer.flush(10)
        assert _low_high(b.bootstrap_servers, "old")[1] == 60
        deadline = time.monotonic() + 15
        low = 0
        while low == 0 and time.monotonic() < deadline:
            low, high = _low_high(b.bootstrap_servers, "old")
            time.sleep(0.05)
        # Old segments went. The active segment stays (it may be empty, when the
        # last append filled a segment and rolled: then the log starts at its end).
        assert 0 < low <= high == 60
        producer.produce("old", b"new", partition=0)
        producer.flush(10)
        assert _low_high(b.bootstrap_servers, "old")[1] == 61  # offsets continue


def test_sigterm_writes_checkpoints_and_the_clean_shutdown_marker(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("c", 2, 1)])["c"].result(10)
        producer = Producer({"bootstrap.servers": server.bootstrap})
        for i in range(10):
            producer.produce("c", b"v", partition=i % 2)
        assert producer.flush(10) == 0
        assert server.stop() == 0
    finally:
        server.kill()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    checkpoint = (tmp_path / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert checkpoint[0] == "0"  # Kafka's checkpoint format: version, count, entries
    assert {"c 0 5", "c 1 5"} <= set(checkpoint[2:])
    assert (tmp_path / "meta.properties").exists()
    assert (tmp_path / "c-0" / "00000000000000000000.log").exists()

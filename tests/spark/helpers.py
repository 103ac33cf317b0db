"""Producing and reading ground truth with a plain client, outside Spark."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

_names = itertools.count()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 1_000_000}"


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> int:
    """Each record: value, and optionally key, partition, timestamp (ms), headers."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    errors: list[str] = []
    n = 0
    for r in records:
        producer.produce(topic, on_delivery=lambda e, m: errors.append(str(e)) if e else None,
                         **r)
        n += 1
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]
    return n


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of every record now in ``topic``, sorted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "truth",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in ends.items()])
    out = []
    done = {p for p, (lo, hi) in ends.items() if lo >= hi}
    deadline = time.monotonic() + 60
    while len(done) < partitions:
        assert time.monotonic() < deadline, "reading the ground truth timed out"
        for m in consumer.consume(1000, 0.5):
            if m.error():
                continue
            out.append((m.partition(), m.offset(), m.value()))
            if m.offset() + 1 >= ends[m.partition()][1]:
                done.add(m.partition())
    consumer.close()
    return sorted(out)


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)

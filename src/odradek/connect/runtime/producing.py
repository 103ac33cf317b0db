"""Producing with confluent-kafka from the runtime's threads: the one place that
waits out a full local queue, and the one that maps a converted record to
``Producer.produce``'s arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from odradek.connect.data import ConnectRecord

QUEUE_FULL_POLL_S = 0.05


def produce(producer: Producer, topic: str, **kwargs: Any) -> None:
    """``producer.produce``; while librdkafka's queue is full (BufferError) it
    serves delivery callbacks and tries again, so nothing is dropped."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(QUEUE_FULL_POLL_S)


def record_kwargs(record: ConnectRecord, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]],
                  on_delivery: Callable[[Any, Any], None]) -> dict[str, Any]:
    """``produce`` arguments for a converted source record (partition, timestamp
    and headers only when the record has them)."""
    kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
    if record.kafka_partition is not None:
        kwargs["partition"] = record.kafka_partition
    if record.timestamp is not None:
        kwargs["timestamp"] = record.timestamp
    if headers:
        kwargs["headers"] = headers
    return kwargs

"""Records and transform construction for the Connect unit tests."""

from __future__ import annotations

from typing import Any

from odradek.connect import plugins
from odradek.connect.data import ConnectRecord, Header, Schema, SinkRecord


def make(name: str, /, **props: str) -> Any:
    """The plugin Kafka calls ``name``, configured with ``props``."""
    obj = plugins.load(name)()
    obj.configure(props)
    return obj


def T(name: str) -> str:
    return "org.apache.kafka.connect.transforms." + name


def record(value: Any = None, value_schema: Schema | None = None, *, key: Any = None,
           key_schema: Schema | None = None, topic: str = "orders",
           timestamp: int | None = 1_700_000_000_123,
           headers: tuple[Header, ...] = ()) -> ConnectRecord:
    return ConnectRecord(topic, 3, key_schema, key, value_schema, value, timestamp, headers)


def sink_record(value: Any, value_schema: Schema | None = None) -> SinkRecord:
    return SinkRecord("orders", 3, None, None, value_schema, value, 1_700_000_000_123,
                      kafka_offset=42)

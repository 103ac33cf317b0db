"""Connect's data model: schemas and records, as Kafka Connect defines them.

A value is plain Python data: ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``list``, ``dict``, or, for logical types, ``decimal.Decimal``,
``datetime.date``, ``datetime.time`` and ``datetime.datetime``. A STRUCT value is
a ``dict`` from field name to value, in the order of its schema's fields. A
record's schema is optional: ``None`` means schemaless, as with
``schemas.enable=false``.

Schema types and their JSON names are Kafka Connect's (``Schema.Type``):
``int8 int16 int32 int64 float32 float64 boolean string bytes array map
struct``. Logical types are named by Kafka's class names (``DECIMAL``,
``DATE``, ``TIME``, ``TIMESTAMP`` below); the JSON converter writes
``float32``/``float64`` as ``float``/``double``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

INT8 = "int8"
INT16 = "int16"
INT32 = "int32"
INT64 = "int64"
FLOAT32 = "float32"
FLOAT64 = "float64"
BOOLEAN = "boolean"
STRING = "string"
BYTES = "bytes"
ARRAY = "array"
MAP = "map"
STRUCT = "struct"
TYPES = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES, ARRAY, MAP,
         STRUCT)
PRIMITIVES = (INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES)

DECIMAL = "org.apache.kafka.connect.data.Decimal"
"""bytes (big-endian two's complement unscaled value); parameter ``scale``."""
DATE = "org.apache.kafka.connect.data.Date"
"""int32: days since the Unix epoch."""
TIME = "org.apache.kafka.connect.data.Time"
"""int32: milliseconds since midnight."""
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
"""int64: milliseconds since the Unix epoch."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, slots=True)
class Schema:
    """A Connect schema. ``fields`` only for STRUCT, ``key_schema`` and
    ``value_schema`` for MAP (both) and ARRAY (``value_schema``: the items)."""

    type: str
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"unknown schema type {self.type!r}")

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def as_optional(self) -> Schema:
        return self if self.optional else replace(self, optional=True)


def struct(*fields: tuple[str, Schema], optional: bool = False, name: str | None = None
           ) -> Schema:
    """A STRUCT schema of ``(name, schema)`` pairs, in order."""
    return Schema(STRUCT, optional=optional, name=name,
                  fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)))


OPTIONAL_STRING = Schema(STRING, optional=True)
OPTIONAL_BYTES = Schema(BYTES, optional=True)


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: Any
    schema: Schema | None = None


@dataclass(frozen=True, slots=True)
class ConnectRecord:
    """What flows through converters and transforms. ``timestamp`` is in ms
    (None: the producer's time). ``kafka_partition`` None lets the producer's
    partitioner choose."""

    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()

    def new_record(self, **changes: Any) -> ConnectRecord:
        """A copy with ``changes`` (the same class: a SourceRecord stays one)."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class SourceRecord(ConnectRecord):
    """A record a source task polled. ``source_partition`` and ``source_offset``
    are JSON-able maps chosen by the connector (the offsets topic stores them
    under the key ``[connector, source_partition]``)."""

    source_partition: Mapping[str, Any] = field(default_factory=dict)
    source_offset: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SinkRecord(ConnectRecord):
    """A record consumed for a sink task, at ``kafka_offset`` of its partition."""

    kafka_offset: int = -1
    timestamp_type: str = "CreateTime"
    original_topic: str = ""
    original_kafka_partition: int = -1
    original_kafka_offset: int = -1

"""Kafka's ``TimestampConverter`` (``$Key``/``$Value``) and ``TimestampRouter``.

TimestampConverter: ``field`` (empty: the whole key/value), ``target.type``
(``string``, ``unix``, ``Date``, ``Time``, ``Timestamp``), ``format`` (a
SimpleDateFormat pattern, see :mod:`dateformat`; needed to write or read
strings), ``unix.precision`` (``seconds``, ``milliseconds`` (default),
``microseconds``, ``nanoseconds``). The input's type comes from its schema
(Timestamp, Date, Time logical types, STRING, INT64) or, schemaless, from the
Python value (datetime, date, time, str, int). As in Kafka the conversion goes
through milliseconds since the epoch in UTC: sub-millisecond parts are
dropped, ``Date`` keeps the day, ``Time`` the time of day. The new schema
(STRING, INT64 or the logical type) keeps the input's optionality.

TimestampRouter: ``topic.format`` (``${topic}-${timestamp}``) and
``timestamp.format`` (``yyyyMMdd``): the record goes to the topic named by
the format with the record's timestamp in UTC.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.config import STRING, ConfigDef, ConfigError, ConfigKey, one_of
from odradek.connect.converters.logical import (
    date_to_days,
    datetime_to_ms,
    days_to_date,
    ms_to_datetime,
    ms_to_time,
    time_to_ms,
)
from odradek.connect.converters.simple import DataError
from odradek.connect.data import ConnectRecord, Schema
from odradek.connect.transforms.base import Transformation
from odradek.connect.transforms.dateformat import DateFormat, PatternError
from odradek.connect.transforms.util import (
    SideTransformation,
    require_map,
    require_struct,
    struct_like,
)

TARGETS = ("string", "unix", "Date", "Time", "Timestamp")
_PRECISION = {"seconds": 1000, "milliseconds": 1, "microseconds": -1000,
              "nanoseconds": -1_000_000}
_SCHEMAS = {"string": Schema(d.STRING), "unix": Schema(d.INT64),
            "Date": Schema(d.INT32, name=d.DATE, version=1),
            "Time": Schema(d.INT32, name=d.TIME, version=1),
            "Timestamp": Schema(d.INT64, name=d.TIMESTAMP, version=1)}


def _compile(name: str, pattern: str) -> DateFormat:
    try:
        return DateFormat(pattern)
    except PatternError as e:
        raise ConfigError(name, f"Invalid value {pattern} for configuration {name}: "
                          f"{e}") from None


class TimestampConverter(SideTransformation):
    CONFIG = ConfigDef((
        ConfigKey("field", STRING, "", documentation="The field to convert (empty: all)."),
        ConfigKey("target.type", STRING, validator=one_of(*TARGETS),
                  documentation="string, unix, Date, Time or Timestamp."),
        ConfigKey("format", STRING, "", documentation="A SimpleDateFormat pattern."),
        ConfigKey("unix.precision", STRING, "milliseconds", validator=one_of(*_PRECISION),
                  documentation="The unit of unix timestamps."),
    ))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.field: str = v["field"]
        self.target: str = v["target.type"]
        self.format = _compile("format", v["format"]) if v["format"] else None
        if self.target == "string" and self.format is None:
            raise ConfigError("format", "TimestampConverter requires format option to be "
                              "specified when using string timestamps")
        self.unit = _PRECISION[v["unix.precision"]]

    @staticmethod
    def _kind(schema: Schema | None, value: Any) -> str:
        if schema is not None:
            kinds = {d.TIMESTAMP: "Timestamp", d.DATE: "Date", d.TIME: "Time"}
            if schema.name in kinds:
                return kinds[schema.name]
            if schema.type == d.STRING:
                return "string"
            if schema.type == d.INT64:
                return "unix"
            raise DataError(f"Schema {schema.name or schema.type} does not correspond to a "
                            "known timestamp type format")
        for py, kind in ((dt.datetime, "Timestamp"), (dt.date, "Date"), (dt.time, "Time"),
                         (str, "string")):
            if isinstance(value, py):
                return kind
        if isinstance(value, int) and not isinstance(value, bool):
            return "unix"
        raise DataError(f"TimestampConverter does not support {type(value).__name__} "
                        "objects as timestamps")

    def _to_ms(self, kind: str, value: Any) -> int:
        if kind == "Timestamp":
            return datetime_to_ms(value)
        if kind == "Date":
            return date_to_days(value) * 86_400_000
        if kind == "Time":
            return time_to_ms(value)
        if kind == "unix":
            n = int(value)
            return n * self.unit if self.unit > 0 else n // -self.unit
        if self.format is None:
            raise DataError("TimestampConverter requires format option to be specified "
                            "when using string timestamps")
        try:
            return datetime_to_ms(self.format.parse(value))
        except ValueError as e:
            raise DataError(f"Could not parse timestamp: value ({value}) does not match "
                            f"pattern ({self.format.pattern}): {e}") from None

    def _from_ms(self, ms: int) -> Any:
        t = self.target
        if t == "Timestamp":
            return ms_to_datetime(ms)
        if t == "Date":
            return days_to_date(ms // 86_400_000)
        if t == "Time":
            return ms_to_time(ms % 86_400_000)
        if t == "unix":
            return ms // self.unit if self.unit > 0 else ms * -self.unit
        assert self.format is not None
        return self.format.format(ms_to_datetime(ms))

    def convert(self, schema: Schema | None, value: Any) -> Any:
        if value is None:
            return None
        return self._from_ms(self._to_ms(self._kind(schema, value), value))

    def _schema(self, old: Schema) -> Schema:
        self._kind(old, None)
        new = _SCHEMAS[self.target]
        return new.as_optional() if old.optional else new

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if not self.field:
            if schema is None:
                return self.with_side(record, None, self.convert(None, value))
            return self.with_side(record, self._schema(schema), self.convert(schema, value))
        if schema is None:
            if value is None:
                return record
            m = require_map(value, "converting timestamp formats")
            if m.get(self.field) is not None:
                m[self.field] = self.convert(None, m[self.field])
            return self.with_side(record, None, m)
        field = schema.field(self.field) if schema.type == d.STRUCT else None
        if field is None:
            raise DataError(f"Unknown field: {self.field}")
        new_schema = struct_like(schema, [
            (f.name, self._schema(f.schema) if f.name == self.field else f.schema)
            for f in schema.fields])
        if value is None:
            return self.with_side(record, new_schema, None)
        struct = require_struct(schema, value, "converting timestamp formats")
        struct[self.field] = self.convert(field.schema, struct.get(self.field))
        return self.with_side(record, new_schema, struct)


class TimestampConverterKey(TimestampConverter):
    IS_KEY = True


class TimestampConverterValue(TimestampConverter):
    IS_KEY = False


class TimestampRouter(Transformation[ConnectRecord]):
    CONFIG = ConfigDef((
        ConfigKey("topic.format", STRING, "${topic}-${timestamp}",
                  documentation="The new topic: ${topic} and ${timestamp} are replaced."),
        ConfigKey("timestamp.format", STRING, "yyyyMMdd",
                  documentation="A SimpleDateFormat pattern for ${timestamp} (UTC)."),
    ))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.topic_format: str = v["topic.format"]
        self.timestamp_format = _compile("timestamp.format", v["timestamp.format"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataError(f"Timestamp missing on record: {record!r}")
        stamp = self.timestamp_format.format(ms_to_datetime(record.timestamp))
        return record.new_record(topic=self.topic_format.replace("${topic}", record.topic)
                                 .replace("${timestamp}", stamp))

"""Kafka's field SMTs: InsertField, ReplaceField, MaskField and ValueToKey.

Each takes a schemaless map (dict) or a STRUCT value with its schema; the
schema'd variants return the updated schema (a STRUCT with the original's
name, version, doc, parameters and optionality). A null value (a tombstone)
passes InsertField, ReplaceField and MaskField unchanged, as in Kafka.

- ``InsertField``: ``topic.field``, ``partition.field``, ``offset.field`` (sink
  records only), ``timestamp.field``, ``static.field`` + ``static.value``; a
  field name ending in ``!`` makes the new field required, ``?`` (the
  default) optional. Types: topic and static STRING, partition INT32, offset
  INT64, timestamp the Timestamp logical type (schemaless: ms as an int).
  Schemaless, a missing partition, timestamp or static value adds no field.
- ``ReplaceField``: ``exclude``, ``include`` (empty: all) and ``renames``
  (``old:new`` pairs).
- ``MaskField``: ``fields`` set to their type's empty value (false, 0, 0.0,
  "", b"", Decimal 0, the epoch, [], {}), or to ``replacement`` parsed as the
  field's type (numbers and strings only).
- ``ValueToKey``: the key becomes a map/STRUCT of the value's ``fields``.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.config import BOOLEAN, LIST, STRING, ConfigDef, ConfigError, ConfigKey
from odradek.connect.converters.logical import ms_to_datetime
from odradek.connect.converters.simple import DataError
from odradek.connect.data import ConnectRecord, Schema, SinkRecord
from odradek.connect.transforms.base import Transformation
from odradek.connect.transforms.util import (
    SideTransformation,
    check_non_empty,
    field_list,
    require_map,
    require_struct,
    struct_like,
)

_NULL_DEFAULT = ConfigKey("replace.null.with.default", BOOLEAN, True,
                          documentation="Whether a null field is replaced by its default.")
TIMESTAMP_SCHEMA = Schema(d.INT64, name=d.TIMESTAMP, version=1)


def _opt(name: str) -> ConfigKey:
    return ConfigKey(name, STRING, None, documentation=f"The field to insert ({name}); "
                     "suffix ! for a required field, ? (default) for an optional one.")


class InsertField(SideTransformation):
    CONFIG = ConfigDef((_opt("topic.field"), _opt("partition.field"), _opt("offset.field"),
                        _opt("timestamp.field"), _opt("static.field"),
                        ConfigKey("static.value", STRING, None,
                                  documentation="The value of static.field."),
                        _NULL_DEFAULT))
    PURPOSE = "field insertion"

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.fields: list[tuple[str, str, bool]] = []  # (what, name, optional)
        for what in ("topic", "partition", "offset", "timestamp", "static"):
            raw = v[f"{what}.field"]
            if raw:
                optional = not raw.endswith("!")
                self.fields.append((what, raw.rstrip("!?"), optional))
        self.static_value = v["static.value"]

    def _values(self, record: ConnectRecord, schemaless: bool) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for what, name, _ in self.fields:
            if what == "topic":
                out.append((name, record.topic))
            elif what == "partition":
                out.append((name, record.kafka_partition))
            elif what == "offset":
                if not isinstance(record, SinkRecord):
                    raise DataError(f"Only SinkRecord supported for [{self.PURPOSE}], "
                                    f"found: {type(record).__name__}")
                out.append((name, record.kafka_offset))
            elif what == "timestamp":
                ts = record.timestamp
                out.append((name, ts if schemaless or ts is None else ms_to_datetime(ts)))
            else:
                out.append((name, self.static_value))
        return out

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        if schema is None:
            updated = require_map(value, self.PURPOSE)
            updated.update((k, v) for k, v in self._values(record, True) if v is not None)
            return self.with_side(record, None, updated)
        struct = require_struct(schema, value, self.PURPOSE)
        types = {"topic": Schema(d.STRING), "partition": Schema(d.INT32),
                 "offset": Schema(d.INT64), "timestamp": TIMESTAMP_SCHEMA,
                 "static": Schema(d.STRING)}
        new_fields = field_list(schema) + [
            (name, types[what].as_optional() if optional else types[what])
            for what, name, optional in self.fields]
        struct.update(self._values(record, False))
        return self.with_side(record, struct_like(schema, new_fields), struct)


class ReplaceField(SideTransformation):
    CONFIG = ConfigDef((
        ConfigKey("exclude", LIST, [], documentation="Fields to drop."),
        ConfigKey("include", LIST, [], documentation="Fields to keep (empty: all)."),
        ConfigKey("renames", LIST, [], documentation="Renames, as old:new pairs."),
        _NULL_DEFAULT))
    PURPOSE = "field replacement"

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.exclude = set(v["exclude"])
        self.include = set(v["include"])
        self.renames: dict[str, str] = {}
        for pair in v["renames"]:
            old, sep, new = pair.partition(":")
            if not sep or not old or not new or ":" in new:
                raise ConfigError("renames", f"Invalid rename mapping: {pair}")
            self.renames[old] = new

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        if schema is None:
            m = require_map(value, self.PURPOSE)
            return self.with_side(record, None, {self.renames.get(k, k): v
                                                 for k, v in m.items() if self._keep(k)})
        struct = require_struct(schema, value, self.PURPOSE)
        kept = [(n, s) for n, s in field_list(schema) if self._keep(n)]
        new_schema = struct_like(schema, [(self.renames.get(n, n), s) for n, s in kept])
        return self.with_side(record, new_schema,
                              {self.renames.get(n, n): struct.get(n) for n, _ in kept})


def _empty(type_: str, name: str | None) -> Any:
    if name == d.DECIMAL:
        return decimal.Decimal(0)
    if name == d.DATE:
        return dt.date(1970, 1, 1)
    if name == d.TIME:
        return dt.time(0)
    if name == d.TIMESTAMP:
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return {d.BOOLEAN: False, d.INT8: 0, d.INT16: 0, d.INT32: 0, d.INT64: 0,
            d.FLOAT32: 0.0, d.FLOAT64: 0.0, d.STRING: "", d.BYTES: b"", d.ARRAY: [],
            d.MAP: {}}.get(type_)


def _type_of(value: Any) -> tuple[str, str | None]:
    """The Connect type of a schemaless value."""
    for py, t, n in ((bool, d.BOOLEAN, None), (int, d.INT64, None),
                     (float, d.FLOAT64, None), (str, d.STRING, None), (bytes, d.BYTES, None),
                     (decimal.Decimal, d.BYTES, d.DECIMAL), (dt.datetime, d.INT64,
                                                             d.TIMESTAMP),
                     (dt.date, d.INT32, d.DATE), (dt.time, d.INT32, d.TIME),
                     (list, d.ARRAY, None), (dict, d.MAP, None)):
        if isinstance(value, py):
            return t, n
    raise DataError(f"Cannot mask value of type {type(value).__name__}")


class MaskField(SideTransformation):
    CONFIG = ConfigDef((
        ConfigKey("fields", LIST, documentation="Fields to mask."),
        ConfigKey("replacement", STRING, None,
                  documentation="The value masked fields get (numbers and strings only)."),
        _NULL_DEFAULT))
    PURPOSE = "mask fields"

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        check_non_empty("fields", v["fields"])
        self.fields = set(v["fields"])
        self.replacement: str | None = v["replacement"]

    def _masked(self, value: Any, type_: str, name: str | None) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _empty(type_, name)
        r = self.replacement
        try:
            if name == d.DECIMAL:
                return decimal.Decimal(r)
            if name is None and type_ in (d.INT8, d.INT16, d.INT32, d.INT64):
                return int(r)
            if name is None and type_ in (d.FLOAT32, d.FLOAT64):
                return float(r)
        except (ValueError, decimal.InvalidOperation):
            raise DataError(f"Unable to convert {r} to {type_}") from None
        if name is None and type_ == d.STRING:
            return r
        raise DataError(f"Cannot mask value of type {name or type_} with custom "
                        "replacement")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        if schema is None:
            m = require_map(value, self.PURPOSE)
            for f in self.fields:
                if f in m and m[f] is not None:
                    m[f] = self._masked(m[f], *_type_of(m[f]))
            return self.with_side(record, None, m)
        struct = require_struct(schema, value, self.PURPOSE)
        for f in self.fields:
            field = schema.field(f)
            if field is None:
                raise DataError(f"{f} is not a valid field name")
            struct[f] = self._masked(struct.get(f), field.schema.type, field.schema.name)
        return self.with_side(record, schema, struct)


class ValueToKey(Transformation[ConnectRecord]):
    CONFIG = ConfigDef((ConfigKey("fields", LIST,
                                  documentation="Fields of the value that make the key."),
                        _NULL_DEFAULT))
    PURPOSE = "copying fields from value to key"

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        check_non_empty("fields", v["fields"])
        self.fields: list[str] = v["fields"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = record.value_schema
        if schema is None:
            m = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None, key={f: m.get(f) for f in self.fields})
        struct = require_struct(schema, record.value, self.PURPOSE)
        key_fields = []
        for f in self.fields:
            field = schema.field(f)
            if field is None:
                raise DataError(f"Field does not exist: {f}")
            key_fields.append((f, field.schema))
        key_schema = struct_like(Schema(d.STRUCT), key_fields)
        return record.new_record(key_schema=key_schema,
                                 key={f: struct.get(f) for f in self.fields})


class InsertFieldKey(InsertField):
    IS_KEY = True


class InsertFieldValue(InsertField):
    IS_KEY = False


class ReplaceFieldKey(ReplaceField):
    IS_KEY = True


class ReplaceFieldValue(ReplaceField):
    IS_KEY = False


class MaskFieldKey(MaskField):
    IS_KEY = True


class MaskFieldValue(MaskField):
    IS_KEY = False

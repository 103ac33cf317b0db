"""Kafka's SMTs that reshape a key or value: ExtractField, HoistField,
Flatten and SetSchemaMetadata (each with ``Key``/``Value`` variants).

- ``ExtractField``: ``field`` — the key/value becomes that field of the
  map/STRUCT (its schema the field's; a null map/STRUCT gives null). Only
  top-level names (Kafka 3.8's ``field.syntax.version=V2`` paths are not
  supported).
- ``HoistField``: ``field`` — the key/value is wrapped in a one-field
  map/STRUCT.
- ``Flatten``: ``delimiter`` (``.``) — nested maps/STRUCTs become top-level
  fields named by their path joined with the delimiter; arrays and (with a
  schema) maps stay values; fields under an optional STRUCT (or in an optional
  top-level STRUCT) become optional.
- ``SetSchemaMetadata``: ``schema.name``, ``schema.version`` — set on the
  schema (records without a schema are an error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from odradek.connect import data as d
from odradek.connect.config import INT, STRING, ConfigDef, ConfigKey, non_empty
from odradek.connect.converters.simple import DataError
from odradek.connect.data import ConnectRecord, Schema
from odradek.connect.transforms.util import (
    SideTransformation,
    require_map,
    require_struct,
    struct_like,
)


class ExtractField(SideTransformation):
    CONFIG = ConfigDef((ConfigKey("field", STRING, validator=non_empty,
                                  documentation="The field to extract."),))
    PURPOSE = "field extraction"

    def configure(self, props: Mapping[str, str]) -> None:
        self.field = str(self.CONFIG.parse(props)["field"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            if value is None:
                return self.with_side(record, None, None)
            return self.with_side(record, None, require_map(value, self.PURPOSE)
                                  .get(self.field))
        field = schema.field(self.field) if schema.type == d.STRUCT else None
        if field is None:
            raise DataError(f"Unknown field: {self.field}")
        if value is None:
            return self.with_side(record, field.schema, None)
        struct = require_struct(schema, value, self.PURPOSE)
        return self.with_side(record, field.schema, struct.get(self.field))


class HoistField(SideTransformation):
    CONFIG = ConfigDef((ConfigKey("field", STRING, validator=non_empty,
                                  documentation="The field name of the wrapped value."),))

    def configure(self, props: Mapping[str, str]) -> None:
        self.field = str(self.CONFIG.parse(props)["field"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            return self.with_side(record, None, {self.field: value})
        return self.with_side(record, d.struct((self.field, schema)), {self.field: value})


class Flatten(SideTransformation):
    CONFIG = ConfigDef((ConfigKey("delimiter", STRING, ".",
                                  documentation="Joins the names of nested fields."),))
    PURPOSE = "flattening"

    def configure(self, props: Mapping[str, str]) -> None:
        self.delimiter = str(self.CONFIG.parse(props)["delimiter"])

    def _name(self, prefix: str, name: str) -> str:
        return prefix + self.delimiter + name if prefix else name

    def _flat_map(self, prefix: str, m: Mapping[Any, Any], out: dict[str, Any]) -> None:
        for k, v in m.items():
            if not isinstance(k, str):
                raise DataError(f"Flatten transformation requires string keys, found "
                                f"{type(k).__name__}")
            if isinstance(v, Mapping):
                self._flat_map(self._name(prefix, k), v, out)
            else:
                out[self._name(prefix, k)] = v

    def _flat_schema(self, prefix: str, schema: Schema, optional: bool,
                     out: list[tuple[str, Schema]]) -> None:
        for f in schema.fields:
            s = f.schema.as_optional() if optional else f.schema
            if f.schema.type == d.STRUCT:
                self._flat_schema(self._name(prefix, f.name), f.schema,
                                  optional or f.schema.optional, out)
            else:
                out.append((self._name(prefix, f.name), s))

    def _flat_struct(self, prefix: str, schema: Schema, value: Mapping[str, Any] | None,
                     out: dict[str, Any]) -> None:
        for f in schema.fields:
            v = None if value is None else value.get(f.name)
            if f.schema.type == d.STRUCT:
                self._flat_struct(self._name(prefix, f.name), f.schema, v, out)
            else:
                out[self._name(prefix, f.name)] = v

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            if value is None:
                return self.with_side(record, None, None)
            out: dict[str, Any] = {}
            self._flat_map("", require_map(value, self.PURPOSE), out)
            return self.with_side(record, None, out)
        if schema.type != d.STRUCT:
            raise DataError(f"Only Struct objects supported for [{self.PURPOSE}], found "
                            f"schema type {schema.type}")
        fields: list[tuple[str, Schema]] = []
        self._flat_schema("", schema, schema.optional, fields)
        new_schema = struct_like(schema, fields)
        if value is None:
            return self.with_side(record, new_schema, None)
        flat: dict[str, Any] = {}
        self._flat_struct("", schema, require_struct(schema, value, self.PURPOSE), flat)
        return self.with_side(record, new_schema, flat)


class SetSchemaMetadata(SideTransformation):
    CONFIG = ConfigDef((ConfigKey("schema.name", STRING, None,
                                  documentation="The schema's new name."),
                        ConfigKey("schema.version", INT, None,
                                  documentation="The schema's new version.")))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.name: str | None = v["schema.name"]
        self.version: int | None = v["schema.version"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.schema_of(record)
        if schema is None:
            raise DataError("Schema required for [updating schema metadata]")
        new = replace(schema, name=self.name if self.name is not None else schema.name,
                      version=self.version if self.version is not None else schema.version)
        return self.with_side(record, new, self.value_of(record))


class ExtractFieldKey(ExtractField):
    IS_KEY = True


class ExtractFieldValue(ExtractField):
    IS_KEY = False


class HoistFieldKey(HoistField):
    IS_KEY = True


class HoistFieldValue(HoistField):
    IS_KEY = False


class FlattenKey(Flatten):
    IS_KEY = True


class FlattenValue(Flatten):
    IS_KEY = False


class SetSchemaMetadataKey(SetSchemaMetadata):
    IS_KEY = True


class SetSchemaMetadataValue(SetSchemaMetadata):
    IS_KEY = False

"""Kafka's header SMTs: HeaderFrom (``$Key``/``$Value``), InsertHeader and
DropHeaders.

- ``HeaderFrom``: ``fields`` and ``headers`` (lists of the same length) and
  ``operation`` (``copy`` or ``move``): each field's value (and, schema'd, its
  schema) is added as the header of the same position; ``move`` also removes
  the field from the map/STRUCT and its schema. A null key/value is an error
  (as in Kafka: put it under a predicate such as ``RecordIsTombstone``, negated).
- ``InsertHeader``: ``header`` and ``value.literal``, parsed as
  :func:`values.parse_text` does (so ``42`` is an INT8 header), appended.
- ``DropHeaders``: ``headers`` — every header with one of those keys is removed.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.connect.config import (
    LIST,
    STRING,
    ConfigDef,
    ConfigError,
    ConfigKey,
    non_empty,
    one_of,
)
from odradek.connect.converters.simple import DataError
from odradek.connect.converters.values import parse_text
from odradek.connect.data import ConnectRecord, Header
from odradek.connect.transforms.base import Transformation
from odradek.connect.transforms.util import (
    SideTransformation,
    check_non_empty,
    field_list,
    require_map,
    require_struct,
    struct_like,
)


class HeaderFrom(SideTransformation):
    CONFIG = ConfigDef((
        ConfigKey("fields", LIST, documentation="Fields whose values become headers."),
        ConfigKey("headers", LIST, documentation="The header names, one per field."),
        ConfigKey("operation", STRING, validator=one_of("move", "copy"),
                  documentation="move or copy."),
    ))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.fields: list[str] = v["fields"]
        self.headers: list[str] = v["headers"]
        check_non_empty("fields", self.fields)
        if len(self.fields) != len(self.headers):
            raise ConfigError("headers", "'fields' config must have the same number of "
                              "elements as 'headers' config.")
        self.move = v["operation"] == "move"

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        added = list(record.headers)
        if schema is None:
            m = require_map(value, "header " + ("move" if self.move else "copy"))
            for f, h in zip(self.fields, self.headers, strict=True):
                added.append(Header(h, m.get(f)))
            if self.move:
                m = {k: v for k, v in m.items() if k not in self.fields}
            return self.with_side(record, None, m).new_record(headers=tuple(added))
        struct = require_struct(schema, value, "header " + ("move" if self.move else "copy"))
        for f, h in zip(self.fields, self.headers, strict=True):
            field = schema.field(f)
            if field is None:
                raise DataError(f"Field {f} not found in schema")
            added.append(Header(h, struct.get(f), field.schema))
        if self.move:
            schema = struct_like(schema, [(n, s) for n, s in field_list(schema)
                                          if n not in self.fields])
            struct = {k: v for k, v in struct.items() if k not in self.fields}
        return self.with_side(record, schema, struct).new_record(headers=tuple(added))


class HeaderFromKey(HeaderFrom):
    IS_KEY = True


class HeaderFromValue(HeaderFrom):
    IS_KEY = False


class InsertHeader(Transformation[ConnectRecord]):
    CONFIG = ConfigDef((
        ConfigKey("header", STRING, validator=non_empty, documentation="The header name."),
        ConfigKey("value.literal", STRING, documentation="The header's value, as text."),
    ))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.header: str = v["header"]
        self.schema, self.value = parse_text(v["value.literal"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return record.new_record(headers=(*record.headers,
                                          Header(self.header, self.value, self.schema)))


class DropHeaders(Transformation[ConnectRecord]):
    CONFIG = ConfigDef((ConfigKey("headers", LIST, documentation="Header names to drop."),))

    def configure(self, props: Mapping[str, str]) -> None:
        names: list[str] = self.CONFIG.parse(props)["headers"]
        check_non_empty("headers", names)
        self.names = set(names)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return record.new_record(headers=tuple(h for h in record.headers
                                               if h.key not in self.names))

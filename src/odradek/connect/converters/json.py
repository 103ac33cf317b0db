"""Kafka's ``JsonConverter`` (``org.apache.kafka.connect.json.JsonConverter``).

Settings (Kafka's names and defaults): ``schemas.enable`` (true),
``schemas.cache.size`` (1000, accepted; parsed schemas are cached by their
JSON text), ``decimal.format`` (``BASE64`` | ``NUMERIC``),
``replace.null.with.default`` (true), ``converter.type`` (key|value|header,
set by the worker).

Wire format with ``schemas.enable=true``: one JSON object with exactly two
fields, ``{"schema": <schema or null>, "payload": <value>}``; with
``schemas.enable=false`` the bare payload. The bytes are compact UTF-8 JSON.

Schema JSON: ``{"type": T, "optional": bool, ...}`` with ``T`` one of
``boolean int8 int16 int32 int64 float double bytes string array map
struct`` (``float``/``double`` are Connect's float32/float64); ``array`` has
``items``, ``map`` has ``keys`` and ``values``, ``struct`` has ``fields``,
each a schema with its ``field`` name; optional ``name``, ``version``,
``doc``, ``parameters`` (string map) and ``default`` (a payload of the same
schema). Payloads by type: numbers and booleans as JSON's, ``bytes`` as
base64 text, ``map`` with STRING keys as an object and otherwise as an array
of ``[key, value]`` pairs, ``struct`` as an object. Logical types (by schema
name): Decimal — base64 of the big-endian two's complement unscaled value,
scale in ``parameters.scale``, or a JSON number with ``decimal.format=NUMERIC``
(read back either way); Date — int32 days since the epoch; Time — int32 ms
since midnight; Timestamp — int64 ms since the epoch (read back as aware UTC
datetimes; naive datetimes are taken as UTC).

A null value with a schema that has a default is written (and read) as the
default when ``replace.null.with.default`` is true; a null for a required
field without a default is a :class:`DataError`. Both key and value null is a
tombstone: ``None`` bytes both ways.

Schemaless data (no schema, or ``schemas.enable=false``) is written from its
Python type: dicts with string keys as objects (other keys as pairs), lists,
bytes as base64 text, ``decimal.Decimal`` as a JSON number; dates and times
need a schema. Read back schemaless, JSON is plain Python data (numbers with a
fraction as floats) and base64 text stays text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.connect.config import BOOLEAN, INT, STRING, ConfigDef, ConfigKey, one_of
from odradek.connect.converters.base import Converter
from odradek.connect.converters.json_data import dumps, from_json, loads, to_json
from odradek.connect.converters.json_schema import schema_from_json, schema_to_json
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema

CONFIG = ConfigDef((
    ConfigKey("schemas.enable", BOOLEAN, True,
              documentation="Include the schema with each value (the envelope)."),
    ConfigKey("schemas.cache.size", INT, 1000,
              documentation="How many parsed schemas are cached."),
    ConfigKey("decimal.format", STRING, "BASE64", validator=one_of("BASE64", "NUMERIC"),
              documentation="How Decimal values are written: base64 bytes or a JSON number."),
    ConfigKey("replace.null.with.default", BOOLEAN, True,
              documentation="Write and read a null value as its schema's default."),
    ConfigKey("converter.type", STRING, "value", validator=one_of("key", "value", "header"),
              documentation="Set by the worker."),
))


class JsonConverter(Converter):
    CONFIG = CONFIG

    def __init__(self) -> None:
        self.schemas_enable = True
        self.numeric_decimals = False
        self.replace_null = True
        self._cache: dict[str, Schema] = {}
        self._cache_size = 1000

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        values = CONFIG.parse(props)
        self.schemas_enable = bool(values["schemas.enable"])
        self.numeric_decimals = values["decimal.format"] == "NUMERIC"
        self.replace_null = bool(values["replace.null.with.default"])
        self._cache_size = int(values["schemas.cache.size"])

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any
                          ) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = to_json(schema, value, numeric_decimals=self.numeric_decimals,
                          replace_null=self.replace_null)
        if self.schemas_enable:
            env = {"schema": None if schema is None else schema_to_json(
                schema, numeric_decimals=self.numeric_decimals), "payload": payload}
            return dumps(env).encode()
        return dumps(payload).encode()

    def to_connect_data(self, topic: str, data: bytes | None
                        ) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        node = loads(data)
        if not self.schemas_enable:
            return None, from_json(None, node)
        if not isinstance(node, dict) or set(node) != {"schema", "payload"}:
            raise DataError('JsonConverter with schemas.enable requires "schema" and '
                            '"payload" fields and may not contain additional fields. If '
                            'you are trying to deserialize plain JSON data, set '
                            'schemas.enable=false in your converter configuration.')
        schema = self._schema(node["schema"])
        return schema, from_json(schema, node["payload"], replace_null=self.replace_null)

    def _schema(self, node: Any) -> Schema | None:
        if node is None:
            return None
        text = dumps(node)
        schema = self._cache.get(text)
        if schema is None:
            schema = schema_from_json(node)
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[text] = schema
        return schema

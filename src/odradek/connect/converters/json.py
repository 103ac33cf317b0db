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

import base64
import binascii
import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.config import BOOLEAN, INT, STRING, ConfigDef, ConfigKey, one_of
from odradek.connect.converters.base import Converter
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Field, Schema

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

_JSON_TYPE = {d.FLOAT32: "float", d.FLOAT64: "double"}
_CONNECT_TYPE = {"boolean": d.BOOLEAN, "int8": d.INT8, "int16": d.INT16, "int32": d.INT32,
                 "int64": d.INT64, "float": d.FLOAT32, "double": d.FLOAT64,
                 "bytes": d.BYTES, "string": d.STRING, "array": d.ARRAY, "map": d.MAP,
                 "struct": d.STRUCT}
_INT_RANGE = {d.INT8: 8, d.INT16: 16, d.INT32: 32, d.INT64: 64}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EPOCH_DATE = dt.date(1970, 1, 1)


# -- values ------------------------------------------------------------------

def decimal_to_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """The big-endian two's complement bytes of ``value``'s unscaled value."""
    unscaled = value.scaleb(scale)
    if unscaled != unscaled.to_integral_value():
        raise DataError(f"Decimal value has mismatching scale for given Decimal schema: "
                        f"{value} with scale {scale}")
    n = int(unscaled)
    return n.to_bytes(((n if n >= 0 else ~n).bit_length() + 8) // 8, "big", signed=True)


def decimal_from_bytes(raw: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


def _scale(schema: Schema) -> int:
    try:
        return int((schema.parameters or {})["scale"])
    except (KeyError, ValueError):
        raise DataError("Invalid Decimal schema: scale parameter not found.") from None


def to_json(schema: Schema | None, value: Any, *, numeric_decimals: bool = False,
            replace_null: bool = True) -> Any:
    """``value`` as a JSON-able tree (Decimal instances stay Decimal: numbers)."""
    if schema is None:
        return _schemaless_to_json(value)
    if value is None:
        if schema.default is not None and replace_null:
            return to_json(schema, schema.default, numeric_decimals=numeric_decimals)
        if schema.optional:
            return None
        raise DataError("Conversion error: null value for field that is required and "
                        "has no default value")
    try:
        return _typed_to_json(schema, value, numeric_decimals, replace_null)
    except (TypeError, AttributeError, OverflowError) as e:
        raise DataError(f"Invalid value {value!r} for schema type {schema.type}: {e}"
                        ) from None


def _typed_to_json(schema: Schema, value: Any, numeric: bool, replace_null: bool) -> Any:
    name, t = schema.name, schema.type
    if name == d.DECIMAL:
        if not isinstance(value, decimal.Decimal):
            raise DataError(f"Invalid type for Decimal: {type(value).__name__}")
        if numeric:
            return value
        return base64.b64encode(decimal_to_bytes(value, _scale(schema))).decode()
    if name == d.DATE and isinstance(value, dt.date):
        return date_to_days(value)
    if name == d.TIME and isinstance(value, dt.time):
        return time_to_ms(value)
    if name == d.TIMESTAMP and isinstance(value, dt.datetime):
        return datetime_to_ms(value)
    if t in _INT_RANGE:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"Invalid Java object for schema type {t.upper()}: "
                            f"{type(value).__name__}")
        bits = _INT_RANGE[t]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise DataError(f"Value {value} out of range for schema type {t.upper()}")
        return value
    if t in (d.FLOAT32, d.FLOAT64):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DataError(f"Invalid Java object for schema type {t.upper()}: "
                            f"{type(value).__name__}")
        return float(value)
    if t == d.BOOLEAN:
        if not isinstance(value, bool):
            raise DataError(f"Invalid Java object for schema type BOOLEAN: "
                            f"{type(value).__name__}")
        return value
    if t == d.STRING:
        if not isinstance(value, str):
            raise DataError(f"Invalid Java object for schema type STRING: "
                            f"{type(value).__name__}")
        return value
    if t == d.BYTES:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise DataError(f"Invalid Java object for schema type BYTES: "
                            f"{type(value).__name__}")
        return base64.b64encode(bytes(value)).decode()
    if t == d.ARRAY:
        items = schema.value_schema
        return [to_json(items, v, numeric_decimals=numeric, replace_null=replace_null)
                for v in value]
    if t == d.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        if ks is not None and ks.type == d.STRING:
            return {to_json(ks, k): to_json(vs, v, numeric_decimals=numeric,
                                            replace_null=replace_null)
                    for k, v in value.items()}
        return [[to_json(ks, k, numeric_decimals=numeric, replace_null=replace_null),
                 to_json(vs, v, numeric_decimals=numeric, replace_null=replace_null)]
                for k, v in value.items()]
    if t == d.STRUCT:
        if not isinstance(value, Mapping):
            raise DataError(f"Invalid Java object for schema type STRUCT: "
                            f"{type(value).__name__}")
        return {f.name: to_json(f.schema, value.get(f.name), numeric_decimals=numeric,
                                replace_null=replace_null) for f in schema.fields}
    raise DataError(f"Invalid value {value!r} for schema {name or t}")


def _schemaless_to_json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | decimal.Decimal):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, list | tuple):
        return [_schemaless_to_json(v) for v in value]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v) for k, v in value.items()}
        return [[_schemaless_to_json(k), _schemaless_to_json(v)] for k, v in value.items()]
    raise DataError(f"Java class {type(value).__name__} does not have corresponding "
                    "schema type.")


def date_to_days(value: dt.date) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    return (value - EPOCH_DATE).days


def time_to_ms(value: dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
        + value.microsecond // 1000


def datetime_to_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def days_to_date(days: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=days)


def ms_to_time(ms: int) -> dt.time:
    if not 0 <= ms < 86_400_000:
        raise DataError(f"Time values must be within a day: {ms} ms")
    s, milli = divmod(ms, 1000)
    return dt.time(s // 3600, s // 60 % 60, s % 60, milli * 1000)


def ms_to_datetime(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


def from_json(schema: Schema | None, node: Any, *, replace_null: bool = True) -> Any:
    """The Connect value of the parsed JSON ``node`` (numbers with a fraction
    parsed as ``decimal.Decimal``) for ``schema``."""
    if schema is None:
        return _plain(node)
    if node is None:
        if schema.default is not None and replace_null:
            return schema.default
        if schema.optional:
            return None
        raise DataError(f"Invalid null value for required {schema.type.upper()} field")
    name, t = schema.name, schema.type
    if name == d.DECIMAL:
        if isinstance(node, int | decimal.Decimal) and not isinstance(node, bool):
            return decimal.Decimal(node)
        if isinstance(node, str):
            return decimal_from_bytes(_b64(node), _scale(schema))
        raise DataError(f"Invalid type for Decimal, underlying representation should be "
                        f"numeric or bytes but was {type(node).__name__}")
    if name in (d.DATE, d.TIME, d.TIMESTAMP):
        if not isinstance(node, int) or isinstance(node, bool):
            raise DataError(f"Invalid type for {name.rsplit('.', 1)[-1]}: "
                            f"{type(node).__name__}")
        return (days_to_date(node) if name == d.DATE else ms_to_time(node)
                if name == d.TIME else ms_to_datetime(node))
    if t in _INT_RANGE:
        if isinstance(node, bool) or not isinstance(node, int):
            raise DataError(f"Invalid JSON for {t} schema: {node!r}")
        return node
    if t in (d.FLOAT32, d.FLOAT64):
        if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
            raise DataError(f"Invalid JSON for {t} schema: {node!r}")
        return float(node)
    if t == d.BOOLEAN:
        if not isinstance(node, bool):
            raise DataError(f"Invalid JSON for boolean schema: {node!r}")
        return node
    if t == d.STRING:
        if not isinstance(node, str):
            raise DataError(f"Invalid JSON for string schema: {node!r}")
        return node
    if t == d.BYTES:
        if not isinstance(node, str):
            raise DataError(f"Invalid JSON for bytes schema: {node!r}")
        return _b64(node)
    if t == d.ARRAY:
        if not isinstance(node, list):
            raise DataError(f"Invalid JSON for array schema: {node!r}")
        return [from_json(schema.value_schema, v, replace_null=replace_null) for v in node]
    if t == d.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        if ks is not None and ks.type == d.STRING:
            if not isinstance(node, dict):
                raise DataError("Maps with string fields should be encoded as JSON objects")
            return {k: from_json(vs, v, replace_null=replace_null) for k, v in node.items()}
        if not isinstance(node, list) or any(
                not isinstance(p, list) or len(p) != 2 for p in node):
            raise DataError("Maps with non-string fields should be encoded as JSON arrays "
                            "of [key, value] pairs")
        return {_hashable(from_json(ks, k, replace_null=replace_null)):
                from_json(vs, v, replace_null=replace_null) for k, v in node}
    if t == d.STRUCT:
        if not isinstance(node, dict):
            raise DataError(f"Invalid JSON for struct schema: {node!r}")
        return {f.name: from_json(f.schema, node.get(f.name), replace_null=replace_null)
                for f in schema.fields}
    raise DataError(f"Unknown schema type {t}")


def _hashable(key: Any) -> Any:
    if isinstance(key, dict | list):
        raise DataError("Map keys must be primitive values")
    return key


def _plain(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    return node


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DataError(f"Invalid bytes field: not base64: {text[:40]!r}") from None


# -- schemas -----------------------------------------------------------------

def schema_to_json(schema: Schema, *, numeric_decimals: bool = False) -> dict[str, Any]:
    """Kafka's JSON form of ``schema``."""
    out: dict[str, Any] = {"type": _JSON_TYPE.get(schema.type, schema.type)}
    if schema.type == d.ARRAY:
        assert schema.value_schema is not None
        out["items"] = schema_to_json(schema.value_schema, numeric_decimals=numeric_decimals)
    elif schema.type == d.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keys"] = schema_to_json(schema.key_schema, numeric_decimals=numeric_decimals)
        out["values"] = schema_to_json(schema.value_schema,
                                       numeric_decimals=numeric_decimals)
    elif schema.type == d.STRUCT:
        out["fields"] = [{**schema_to_json(f.schema, numeric_decimals=numeric_decimals),
                          "field": f.name} for f in schema.fields]
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = to_json(schema, schema.default, numeric_decimals=numeric_decimals)
    return out


def schema_from_json(node: Any) -> Schema:
    """The Connect schema of Kafka's schema JSON ``node``."""
    if not isinstance(node, dict):
        raise DataError(f"Schema must be a JSON object: {node!r}")
    type_name = node.get("type")
    if not isinstance(type_name, str):
        raise DataError("Schema must contain 'type' field")
    t = _CONNECT_TYPE.get(type_name)
    if t is None:
        raise DataError(f"Unknown schema type: {type_name}")
    fields: tuple[Field, ...] = ()
    key_schema = value_schema = None
    if t == d.ARRAY:
        if "items" not in node:
            raise DataError("Array schema did not specify the element type")
        value_schema = schema_from_json(node["items"])
    elif t == d.MAP:
        if "keys" not in node or "values" not in node:
            raise DataError("Map schema did not specify the key and value types")
        key_schema = schema_from_json(node["keys"])
        value_schema = schema_from_json(node["values"])
    elif t == d.STRUCT:
        raw_fields = node.get("fields")
        if not isinstance(raw_fields, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        built = []
        for i, f in enumerate(raw_fields):
            if not isinstance(f, dict) or not isinstance(f.get("field"), str):
                raise DataError("Struct schema's field name not specified properly")
            built.append(Field(f["field"], i, schema_from_json(f)))
        fields = tuple(built)
    optional = node.get("optional", False)
    version = node.get("version")
    params = node.get("parameters")
    if not isinstance(optional, bool) or (version is not None and (
            not isinstance(version, int) or isinstance(version, bool))):
        raise DataError("Invalid schema: 'optional' must be a boolean, 'version' an integer")
    if params is not None and (not isinstance(params, dict) or not all(
            isinstance(v, str) for v in params.values())):
        raise DataError("Schema parameters must be a map of strings")
    name, doc = node.get("name"), node.get("doc")
    if (name is not None and not isinstance(name, str)) or (
            doc is not None and not isinstance(doc, str)):
        raise DataError("Invalid schema: 'name' and 'doc' must be strings")
    schema = Schema(t, optional=optional, name=name, version=version, doc=doc,
                    parameters=params or None, fields=fields, key_schema=key_schema,
                    value_schema=value_schema)
    if node.get("default") is not None:
        default = from_json(schema, _decimals(node["default"]))
        schema = Schema(t, optional=optional, default=default, name=name, version=version,
                        doc=doc, parameters=params or None, fields=fields,
                        key_schema=key_schema, value_schema=value_schema)
    return schema


def _decimals(node: Any) -> Any:
    """Floats in an already-parsed tree as Decimal (what :func:`loads` gives)."""
    if isinstance(node, float):
        return decimal.Decimal(repr(node)) if math.isfinite(node) else node
    if isinstance(node, list):
        return [_decimals(v) for v in node]
    if isinstance(node, dict):
        return {k: _decimals(v) for k, v in node.items()}
    return node


# -- text --------------------------------------------------------------------

def dumps(node: Any) -> str:
    """Compact JSON of a tree that may hold Decimal (written as plain numbers)."""
    if isinstance(node, decimal.Decimal):
        if not node.is_finite():
            raise DataError(f"Decimal value {node} cannot be written as JSON")
        return format(node, "f")
    if isinstance(node, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dumps(v)
                              for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ",".join(dumps(v) for v in node) + "]"
    return json.dumps(node, ensure_ascii=False)


def loads(text: bytes | str) -> Any:
    """Parse JSON; numbers with a fraction or exponent become Decimal."""
    try:
        return json.loads(text, parse_float=decimal.Decimal)
    except (ValueError, RecursionError) as e:
        raise DataError(f"Converting byte[] to Kafka Connect data failed due to "
                        f"serialization error: {e}") from None


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

"""Connect values to and from JSON trees, as Kafka's ``JsonConverter``
writes payloads (the formats are in :mod:`odradek.connect.converters.json`),
and compact JSON text in which ``decimal.Decimal`` is a plain JSON number."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.converters.logical import (
    date_to_days,
    datetime_to_ms,
    days_to_date,
    decimal_from_bytes,
    decimal_to_bytes,
    ms_to_datetime,
    ms_to_time,
    time_to_ms,
)
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema

_INT_RANGE = {d.INT8: 8, d.INT16: 16, d.INT32: 32, d.INT64: 64}

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

"""Header values as text: a simplified form of Kafka's ``Values``
(``convertToString`` and ``parseString``), used by ``SimpleHeaderConverter``
and by ``InsertHeader``'s ``value.literal``.

To text (:func:`to_text`): strings as they are; booleans ``true``/``false``;
numbers in decimal (floats as Python's ``repr``, e.g. ``1.0``, ``1e-05``,
where Java would write ``1.0E-5``); ``decimal.Decimal`` plain; bytes as
base64; Timestamp ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'``, Date ``yyyy-MM-dd``, Time
``HH:mm:ss.SSS'Z'`` (UTC); lists and maps as JSON (strings quoted).

From text (:func:`parse_text`), in this order: empty → ""; ``null`` → null;
``true``/``false`` (any case) → BOOLEAN; a whole number (also ``5.0`` or
``1e3``) → the smallest of INT8/INT16/INT32/INT64 that holds it (larger:
Decimal with scale 0); another number → FLOAT64 with the exact double (Kafka
gives FLOAT32 with the value rounded to a float when it fits: simplified here
so no precision is lost); the three date/time forms above → Date/Time/Timestamp; text
starting with ``[`` or ``{`` that is valid JSON → a list or dict without a
schema (Kafka infers an element schema when the elements agree: not done
here); anything else → the text as STRING.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.data import Schema

_INT_SCHEMAS = ((8, Schema(d.INT8)), (16, Schema(d.INT16)), (32, Schema(d.INT32)),
                (64, Schema(d.INT64)))
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z")
STRING_SCHEMA = Schema(d.STRING)
BOOLEAN_SCHEMA = Schema(d.BOOLEAN)
FLOAT64_SCHEMA = Schema(d.FLOAT64)
DATE_SCHEMA = Schema(d.INT32, name=d.DATE, version=1)
TIME_SCHEMA = Schema(d.INT32, name=d.TIME, version=1)
TIMESTAMP_SCHEMA = Schema(d.INT64, name=d.TIMESTAMP, version=1)


def to_text(value: Any) -> str | None:
    """``value`` as header text (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return _literal(value, embedded=False)


def _literal(value: Any, *, embedded: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if embedded else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bytes | bytearray | memoryview):
        text = base64.b64encode(bytes(value)).decode()
        return f'"{text}"' if embedded else text
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    elif isinstance(value, dt.date):
        text = value.isoformat()
    elif isinstance(value, dt.time):
        text = value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    elif isinstance(value, list | tuple):
        return "[" + ",".join(_literal(v, embedded=True) for v in value) + "]"
    elif isinstance(value, Mapping):
        return "{" + ",".join(_literal(str(k), embedded=True) + ":" +
                              _literal(v, embedded=True) for k, v in value.items()) + "}"
    else:
        text = str(value)
    return f'"{text}"' if embedded else text


def _integer(n: int) -> tuple[Schema, Any]:
    for bits, schema in _INT_SCHEMAS:
        if -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
            return schema, n
    return Schema(d.BYTES, name=d.DECIMAL, version=1,
                  parameters={"scale": "0"}), decimal.Decimal(n)


def parse_text(text: str) -> tuple[Schema | None, Any]:
    """The schema and value ``text`` reads as (see the module docstring)."""
    s = text.strip()
    if s == "":
        return STRING_SCHEMA, text
    if s == "null":
        return None, None
    if s.lower() in ("true", "false"):
        return BOOLEAN_SCHEMA, s.lower() == "true"
    if _INT.fullmatch(s):
        return _integer(int(s))
    if _FLOAT.fullmatch(s):
        exact = decimal.Decimal(s)
        if exact == exact.to_integral_value() and abs(exact) < 10 ** 19:
            return _integer(int(exact))
        return FLOAT64_SCHEMA, float(s)
    try:
        if m := _TIMESTAMP.fullmatch(s):
            y, mo, da, h, mi, se, ms = map(int, m.groups())
            return TIMESTAMP_SCHEMA, dt.datetime(y, mo, da, h, mi, se, ms * 1000,
                                                 tzinfo=dt.UTC)
        if m := _DATE.fullmatch(s):
            return DATE_SCHEMA, dt.date(*map(int, m.groups()))
        if m := _TIME.fullmatch(s):
            h, mi, se, ms = map(int, m.groups())
            return TIME_SCHEMA, dt.time(h, mi, se, ms * 1000)
    except ValueError:
        return STRING_SCHEMA, text
    if s[0] in "[{":
        try:
            parsed = json.loads(s)
        except ValueError:
            return STRING_SCHEMA, text
        return None, parsed
    return STRING_SCHEMA, text

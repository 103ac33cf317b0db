"""The number converters, SimpleHeaderConverter, header text, and the
converters' plugin names."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from odradek.connect import data as d
from odradek.connect import plugins
from odradek.connect.converters.header import SimpleHeaderConverter
from odradek.connect.converters.numbers import (
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    NumberConverter,
    ShortConverter,
)
from odradek.connect.converters.simple import DataError
from odradek.connect.converters.values import parse_text, to_text


@pytest.mark.parametrize("cls,value,raw", [
    (ShortConverter, -2, b"\xff\xfe"),
    (IntegerConverter, 258, b"\x00\x00\x01\x02"),
    (LongConverter, -1, b"\xff" * 8),
    (FloatConverter, 1.5, b"\x3f\xc0\x00\x00"),
    (DoubleConverter, -2.0, b"\xc0\x00\x00\x00\x00\x00\x00\x00"),
])
def test_numbers_are_big_endian_both_ways(cls: type[NumberConverter], value: float,
                                          raw: bytes) -> None:
    c = cls()
    c.configure({}, False)
    assert c.from_connect_data("t", None, value) == raw
    schema, back = c.to_connect_data("t", raw)
    assert back == value and schema is not None and schema.optional
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None) == (cls.SCHEMA, None)


def test_number_errors() -> None:
    with pytest.raises(DataError):
        ShortConverter().from_connect_data("t", None, 1 << 20)
    with pytest.raises(DataError):
        IntegerConverter().from_connect_data("t", None, "5")
    with pytest.raises(DataError):
        LongConverter().from_connect_data("t", None, 1.5)
    with pytest.raises(DataError, match="is not 4"):
        IntegerConverter().to_connect_data("t", b"\x00")


@pytest.mark.parametrize("text,type_,value", [
    ("true", d.BOOLEAN, True), ("FALSE", d.BOOLEAN, False), ("42", d.INT8, 42),
    ("300", d.INT16, 300), ("70000", d.INT32, 70000), ("5000000000", d.INT64, 5_000_000_000),
    ("1.5", d.FLOAT64, 1.5), ("5.0", d.INT8, 5), ("1e3", d.INT16, 1000),
    ("hello", d.STRING, "hello"), ("", d.STRING, ""),
    ("2024-02-29", d.INT32, dt.date(2024, 2, 29)),
    ("12:30:00.250Z", d.INT32, dt.time(12, 30, 0, 250_000)),
    ("2024-02-29T12:30:00.250Z", d.INT64, dt.datetime(2024, 2, 29, 12, 30, 0, 250_000,
                                                      tzinfo=dt.UTC)),
    ("2024-02-30", d.STRING, "2024-02-30"), ("[1,", d.STRING, "[1,"),
])
def test_parse_text(text: str, type_: str, value: object) -> None:
    schema, parsed = parse_text(text)
    assert schema is not None and schema.type == type_
    assert parsed == value


def test_parse_text_nulls_lists_maps_and_big_integers() -> None:
    assert parse_text("null") == (None, None)
    assert parse_text('[1,"a"]') == (None, [1, "a"])
    assert parse_text('{"a":{"b":true}}') == (None, {"a": {"b": True}})
    schema, big = parse_text("1" * 30)
    assert schema is not None and schema.name == d.DECIMAL and big == decimal.Decimal("1" * 30)


def test_to_text() -> None:
    assert to_text(None) is None
    assert to_text("x y") == "x y"
    assert to_text(True) == "true"
    assert to_text(b"\x00\x01") == "AAE="
    assert to_text([1, "a", None]) == '[1,"a",null]'
    assert to_text({"k": [True]}) == '{"k":[true]}'
    assert to_text(dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)) == \
        "2024-01-02T03:04:05.006Z"


@pytest.mark.parametrize("value", [
    "text", 7, 300, -5_000_000_000, 2.5, True, None, [1, 2], {"a": "b"},
    dt.date(2020, 5, 6), dt.datetime(2020, 5, 6, 7, 8, 9, tzinfo=dt.UTC)])
def test_header_converter_round_trip(value: object) -> None:
    c = SimpleHeaderConverter()
    c.configure({})
    raw = c.from_connect_header("t", "h", None, value)
    assert c.to_connect_header("t", "h", raw)[1] == value


def test_header_converter_keeps_non_utf8_bytes() -> None:
    schema, value = SimpleHeaderConverter().to_connect_header("t", "h", b"\xff\xfe")
    assert schema is not None and schema.type == d.BYTES and value == b"\xff\xfe"


@pytest.mark.parametrize("name,cls", [
    ("org.apache.kafka.connect.json.JsonConverter", "JsonConverter"),
    ("org.apache.kafka.connect.converters.IntegerConverter", "IntegerConverter"),
    ("org.apache.kafka.connect.converters.LongConverter", "LongConverter"),
    ("org.apache.kafka.connect.converters.ShortConverter", "ShortConverter"),
    ("org.apache.kafka.connect.converters.FloatConverter", "FloatConverter"),
    ("org.apache.kafka.connect.converters.DoubleConverter", "DoubleConverter"),
    ("org.apache.kafka.connect.storage.SimpleHeaderConverter", "SimpleHeaderConverter"),
    ("JsonConverter", "JsonConverter"),
])
def test_plugin_names(name: str, cls: str) -> None:
    assert plugins.load(name).__name__ == cls

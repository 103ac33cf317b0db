"""Cast, TimestampConverter, TimestampRouter and SimpleDateFormat patterns."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import data as d
from odradek.connect.config import ConfigError
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema
from odradek.connect.transforms.cast import cast
from odradek.connect.transforms.dateformat import DateFormat, PatternError

from .helpers import T, make, record


@pytest.mark.parametrize("value,target,expected", [
    (300, d.INT8, 44), (-129, d.INT8, 127), (3.9, d.INT32, 3), (-3.9, d.INT64, -3),
    (1e20, d.INT64, (1 << 63) - 1), (float("nan"), d.INT16, 0), (True, d.INT32, 1),
    ("42", d.INT16, 42), (decimal.Decimal("7.9"), d.INT32, 7),
    (1, d.FLOAT64, 1.0), ("2.5", d.FLOAT32, 2.5), (0.1, d.FLOAT32, 0.10000000149011612),
    (0, d.BOOLEAN, False), (0.5, d.BOOLEAN, False), (2, d.BOOLEAN, True),
    ("TRUE", d.BOOLEAN, True), ("yes", d.BOOLEAN, False),
    (12, d.STRING, "12"), (1.5, d.STRING, "1.5"), (False, d.STRING, "false"),
    (b"\x00\x01", d.STRING, "AAE="), (None, d.INT8, None),
])
def test_cast_values(value: Any, target: str, expected: Any) -> None:
    assert cast(value, target) == expected


def test_cast_value_errors() -> None:
    with pytest.raises(DataError, match="out of range"):
        cast("300", d.INT8)
    with pytest.raises(DataError, match="not a valid"):
        cast("x", d.INT32)
    with pytest.raises(DataError):
        cast([1], d.INT32)


def test_cast_fields_schemaless_and_with_schema() -> None:
    t = make(T("Cast$Value"), spec="a:string, b:int8")
    assert t.apply(record({"a": 1, "b": "5", "c": 1.5})).value == {"a": "1", "b": 5, "c": 1.5}
    s = d.struct(("a", Schema(d.INT32, optional=True)), ("b", Schema(d.STRING)),
                 ("c", Schema(d.FLOAT64)), name="n")
    out = t.apply(record({"a": None, "b": "7", "c": 1.5}, s))
    assert [(f.name, f.schema.type, f.schema.optional) for f in out.value_schema.fields] == [
        ("a", d.STRING, True), ("b", d.INT8, False), ("c", d.FLOAT64, False)]
    assert out.value_schema.name == "n"
    assert out.value == {"a": None, "b": 7, "c": 1.5}


def test_cast_whole_value_and_key() -> None:
    t = make(T("Cast$Key"), spec="int64")
    out = t.apply(record(None, key="12", key_schema=Schema(d.STRING, optional=True)))
    assert out.key == 12 and out.key_schema == Schema(d.INT64, optional=True)
    assert make(T("Cast$Value"), spec="string").apply(record(3)).value == "3"


def test_cast_bad_specs_and_sources() -> None:
    for spec in ("a:int128", "int8,a:string", ""):
        with pytest.raises(ConfigError) as e:
            make(T("Cast$Value"), spec=spec)
        assert e.value.name == "spec"
    ts = d.struct(("t", Schema(d.INT64, name=d.TIMESTAMP)))
    with pytest.raises(DataError, match="does not support"):
        make(T("Cast$Value"), spec="t:int32").apply(
            record({"t": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}, ts))


def test_date_format_round_trip_and_letters() -> None:
    f = DateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSX")
    when = dt.datetime(2024, 2, 29, 13, 5, 9, 7000, tzinfo=dt.UTC)
    assert f.format(when) == "2024-02-29T13:05:09.007Z"
    assert f.parse("2024-02-29T13:05:09.007Z") == when
    assert f.parse("2024-02-29T15:05:09.007+02:00") == when
    g = DateFormat("EEE, d MMM yy h:mm a Z")
    assert g.format(when) == "Thu, 29 Feb 24 1:05 PM +0000"
    assert g.parse("Thu, 29 Feb 24 1:05 PM +0000") == when.replace(second=0, microsecond=0)
    assert DateFormat("yyyyMMddHH").parse("2024022913") == when.replace(
        minute=0, second=0, microsecond=0)
    assert DateFormat("''yyyy'' 'o''clock'").format(when) == "'2024' o'clock"
    with pytest.raises(PatternError, match="Illegal pattern character 'Q'"):
        DateFormat("yyyyQ")
    with pytest.raises(ValueError, match="Unparseable"):
        f.parse("2024-02-29")


@pytest.mark.parametrize("target,props,expected", [
    ("Timestamp", {}, dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)),
    ("Date", {}, dt.date(2023, 11, 14)),
    ("Time", {}, dt.time(22, 13, 20, 123000)),
    ("unix", {"unix.precision": "seconds"}, 1_700_000_000),
    ("unix", {"unix.precision": "microseconds"}, 1_700_000_000_123_000),
    ("string", {"format": "yyyy-MM-dd HH:mm:ss.SSS"}, "2023-11-14 22:13:20.123"),
])
def test_timestamp_converter_targets(target: str, props: dict[str, str], expected: Any
                                     ) -> None:
    t = make(T("TimestampConverter$Value"), **{"target.type": target, **props})
    when = dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    assert t.apply(record(when)).value == expected
    out = t.apply(record(when, Schema(d.INT64, name=d.TIMESTAMP, optional=True)))
    assert out.value == expected and out.value_schema.optional
    if target not in ("string", "unix"):
        assert t.apply(record(1_700_000_000_123)).value == expected  # unix ms in


def test_timestamp_converter_reads_unix_in_its_precision() -> None:
    t = make(T("TimestampConverter$Value"), **{"target.type": "Timestamp",
                                               "unix.precision": "seconds"})
    assert t.apply(record(86_400)).value == dt.datetime(1970, 1, 2, tzinfo=dt.UTC)


def test_timestamp_converter_field_with_schema_and_string_input() -> None:
    s = d.struct(("id", Schema(d.INT32)), ("at", Schema(d.STRING)))
    t = make(T("TimestampConverter$Value"), field="at", **{"target.type": "Timestamp",
                                                           "format": "dd/MM/yyyy"})
    out = t.apply(record({"id": 1, "at": "02/01/2024"}, s))
    assert out.value == {"id": 1, "at": dt.datetime(2024, 1, 2, tzinfo=dt.UTC)}
    assert out.value_schema.fields[1].schema.name == d.TIMESTAMP
    u = make(T("TimestampConverter$Value"), field="at", **{"target.type": "unix",
                                                           "unix.precision": "nanoseconds"})
    assert u.apply(record({"at": dt.date(1970, 1, 2)})).value == {"at": 86_400 * 10 ** 9}
    with pytest.raises(DataError, match="Could not parse"):
        t.apply(record({"at": "2024-01-02"}))


def test_timestamp_converter_bad_config() -> None:
    with pytest.raises(ConfigError) as e:
        make(T("TimestampConverter$Value"), **{"target.type": "string"})
    assert e.value.name == "format"
    with pytest.raises(ConfigError) as e:
        make(T("TimestampConverter$Value"), **{"target.type": "epoch"})
    assert e.value.name == "target.type"
    with pytest.raises(ConfigError) as e:
        make(T("TimestampConverter$Value"), **{"target.type": "unix",
                                               "unix.precision": "days"})
    assert e.value.name == "unix.precision"
    with pytest.raises(ConfigError) as e:
        make(T("TimestampConverter$Value"), **{"target.type": "string", "format": "yyyyQ"})
    assert e.value.name == "format"


def test_timestamp_router() -> None:
    t = make(T("TimestampRouter"))
    assert t.apply(record(1)).topic == "orders-20231114"
    h = make(T("TimestampRouter"), **{"topic.format": "x_${timestamp}_${topic}",
                                      "timestamp.format": "yyyy.MM.dd.HH"})
    assert h.apply(record(1)).topic == "x_2023.11.14.22_orders"
    with pytest.raises(DataError, match="Timestamp missing"):
        t.apply(record(1, timestamp=None))


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2069, 12, 31)),
       st.sampled_from(["yyyy-MM-dd'T'HH:mm:ss.SSSZ", "dd MMMM yyyy hh:mm:ss.SSS a",
                        "EEE, d MMM yy HH:mm:ss.SSS X", "yyyyMMddHHmmssSSS",
                        "D yyyy k:m:s.S"]))
def test_date_format_round_trips(when: dt.datetime, pattern: str) -> None:
    when = when.replace(microsecond=when.microsecond // 1000 * 1000, tzinfo=dt.UTC)
    f = DateFormat(pattern)
    assert f.parse(f.format(when)) == when

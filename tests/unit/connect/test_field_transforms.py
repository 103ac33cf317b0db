"""InsertField, ReplaceField, MaskField and ValueToKey, schemaless and with schemas."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from odradek.connect import data as d
from odradek.connect.config import ConfigError
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema

from .helpers import T, make, record, sink_record

VALUE = d.struct(("id", Schema(d.INT32)), ("name", Schema(d.STRING)),
                 ("score", Schema(d.FLOAT64, optional=True)), name="v", optional=True)
ROW = {"id": 1, "name": "ann", "score": 2.5}


def test_insert_field_schemaless() -> None:
    t = make(T("InsertField$Value"), **{"topic.field": "t", "partition.field": "p",
                                        "offset.field": "o", "timestamp.field": "ts",
                                        "static.field": "s", "static.value": "x"})
    out = t.apply(sink_record({"a": 1}))
    assert out.value == {"a": 1, "t": "orders", "p": 3, "o": 42,
                         "ts": 1_700_000_000_123, "s": "x"}


def test_insert_field_with_schema_and_required_suffix() -> None:
    t = make(T("InsertField$Value"), **{"topic.field": "t!", "timestamp.field": "ts?"})
    out = t.apply(record(dict(ROW), VALUE))
    assert [(f.name, f.schema.type, f.schema.optional) for f in out.value_schema.fields][3:] \
        == [("t", d.STRING, False), ("ts", d.INT64, True)]
    assert out.value_schema.fields[4].schema.name == d.TIMESTAMP
    assert out.value_schema.name == "v" and out.value_schema.optional
    assert out.value["t"] == "orders"
    assert out.value["ts"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)


def test_insert_field_key_tombstone_and_offset_on_source_record() -> None:
    t = make(T("InsertField$Key"), **{"topic.field": "t"})
    assert t.apply(record({"v": 1}, key={"k": 1})).key == {"k": 1, "t": "orders"}
    v = make(T("InsertField$Value"), **{"topic.field": "t"})
    tomb = record(None)
    assert v.apply(tomb) is tomb
    o = make(T("InsertField$Value"), **{"offset.field": "o"})
    with pytest.raises(DataError, match="SinkRecord"):
        o.apply(record({"a": 1}))
    with pytest.raises(DataError, match="Only Map"):
        v.apply(record("text"))


def test_replace_field() -> None:
    t = make(T("ReplaceField$Value"), exclude="score", renames="id:key,name:who")
    assert t.apply(record(dict(ROW))).value == {"key": 1, "who": "ann"}
    out = t.apply(record(dict(ROW), VALUE))
    assert [f.name for f in out.value_schema.fields] == ["key", "who"]
    assert [f.index for f in out.value_schema.fields] == [0, 1]
    assert out.value == {"key": 1, "who": "ann"}
    inc = make(T("ReplaceField$Value"), include="name")
    assert inc.apply(record(dict(ROW), VALUE)).value == {"name": "ann"}


def test_replace_field_bad_rename() -> None:
    with pytest.raises(ConfigError) as e:
        make(T("ReplaceField$Value"), renames="nocolon")
    assert e.value.name == "renames"


def test_mask_field() -> None:
    t = make(T("MaskField$Value"), fields="id,name,score")
    assert t.apply(record(dict(ROW))).value == {"id": 0, "name": "", "score": 0.0}
    out = t.apply(record({"id": 1, "name": "x", "score": None}, VALUE))
    assert out.value == {"id": 0, "name": "", "score": None}
    assert out.value_schema == VALUE
    r = make(T("MaskField$Value"), fields="name", replacement="***")
    assert r.apply(record(dict(ROW), VALUE)).value["name"] == "***"
    n = make(T("MaskField$Value"), fields="id", replacement="-1")
    assert n.apply(record(dict(ROW), VALUE)).value["id"] == -1
    logical = make(T("MaskField$Value"), fields="amount,day")
    assert logical.apply(record({"amount": decimal.Decimal("9.99"),
                                 "day": dt.date(2020, 1, 1)})).value == {
        "amount": decimal.Decimal(0), "day": dt.date(1970, 1, 1)}


def test_mask_field_errors() -> None:
    with pytest.raises(ConfigError) as e:
        make(T("MaskField$Value"))
    assert e.value.name == "fields"
    with pytest.raises(DataError, match="Unable to convert"):
        make(T("MaskField$Value"), fields="id", replacement="abc").apply(
            record(dict(ROW), VALUE))
    with pytest.raises(DataError, match="custom"):
        make(T("MaskField$Value"), fields="b", replacement="x").apply(record({"b": True}))


def test_value_to_key() -> None:
    t = make(T("ValueToKey"), fields="id,name")
    assert t.apply(record(dict(ROW))).key == {"id": 1, "name": "ann"}
    out = t.apply(record(dict(ROW), VALUE))
    assert [(f.name, f.schema.type) for f in out.key_schema.fields] == [
        ("id", d.INT32), ("name", d.STRING)]
    assert out.key == {"id": 1, "name": "ann"}
    with pytest.raises(DataError, match="Field does not exist: nope"):
        make(T("ValueToKey"), fields="nope").apply(record(dict(ROW), VALUE))
    with pytest.raises(ConfigError) as e:
        make(T("ValueToKey"), fields="")
    assert e.value.name == "fields"

"""ExtractField, HoistField, Flatten and SetSchemaMetadata."""

from __future__ import annotations

import pytest

from odradek.connect import data as d
from odradek.connect.config import ConfigError
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema

from .helpers import T, make, record

INNER = d.struct(("x", Schema(d.INT32)), ("y", Schema(d.STRING)), optional=True)
OUTER = d.struct(("id", Schema(d.INT64)), ("pos", INNER),
                 ("tags", Schema(d.ARRAY, value_schema=Schema(d.STRING))), name="o")


def test_extract_field() -> None:
    t = make(T("ExtractField$Value"), field="id")
    assert t.apply(record({"id": 5, "x": 1})).value == 5
    assert t.apply(record({"x": 1})).value is None
    assert t.apply(record(None)).value is None
    out = t.apply(record({"id": 5, "pos": None, "tags": []}, OUTER))
    assert out.value == 5 and out.value_schema == Schema(d.INT64)
    k = make(T("ExtractField$Key"), field="pos")
    out = k.apply(record(None, key={"id": 1, "pos": {"x": 1, "y": "a"}, "tags": []},
                         key_schema=OUTER))
    assert out.key == {"x": 1, "y": "a"} and out.key_schema == INNER
    with pytest.raises(DataError, match="Unknown field: nope"):
        make(T("ExtractField$Value"), field="nope").apply(record({"id": 1}, OUTER))
    with pytest.raises(ConfigError) as e:
        make(T("ExtractField$Value"))
    assert e.value.name == "field"


def test_hoist_field() -> None:
    t = make(T("HoistField$Value"), field="line")
    assert t.apply(record("hello")).value == {"line": "hello"}
    out = t.apply(record("hello", Schema(d.STRING)))
    assert out.value_schema == d.struct(("line", Schema(d.STRING)))
    assert out.value == {"line": "hello"}


def test_flatten_schemaless() -> None:
    t = make(T("Flatten$Value"), delimiter="_")
    assert t.apply(record({"a": {"b": {"c": 1}, "d": [1, {"e": 2}]}, "f": None})).value == {
        "a_b_c": 1, "a_d": [1, {"e": 2}], "f": None}
    assert t.apply(record(None)).value is None


def test_flatten_with_schema() -> None:
    t = make(T("Flatten$Value"))
    out = t.apply(record({"id": 1, "pos": {"x": 2, "y": "q"}, "tags": ["t"]}, OUTER))
    assert [(f.name, f.schema.type, f.schema.optional) for f in out.value_schema.fields] == [
        ("id", d.INT64, False), ("pos.x", d.INT32, True), ("pos.y", d.STRING, True),
        ("tags", d.ARRAY, False)]
    assert out.value_schema.name == "o"
    assert out.value == {"id": 1, "pos.x": 2, "pos.y": "q", "tags": ["t"]}
    out = t.apply(record({"id": 1, "pos": None, "tags": []}, OUTER))
    assert out.value == {"id": 1, "pos.x": None, "pos.y": None, "tags": []}


def test_set_schema_metadata() -> None:
    t = make(T("SetSchemaMetadata$Value"), **{"schema.name": "n", "schema.version": "3"})
    out = t.apply(record({"id": 1, "pos": None, "tags": []}, OUTER))
    assert (out.value_schema.name, out.value_schema.version) == ("n", 3)
    assert out.value_schema.fields == OUTER.fields
    with pytest.raises(DataError, match="Schema required"):
        t.apply(record({"a": 1}))
    with pytest.raises(ConfigError) as e:
        make(T("SetSchemaMetadata$Value"), **{"schema.version": "x"})
    assert e.value.name == "schema.version"


def test_flatten_optional_struct_makes_every_field_optional() -> None:
    t = make(T("Flatten$Value"))
    out = t.apply(record({"id": 1, "pos": None, "tags": []}, OUTER.as_optional()))
    assert all(f.schema.optional for f in out.value_schema.fields)

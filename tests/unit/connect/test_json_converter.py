"""JsonConverter: Kafka's envelope and schema JSON, logical types, the
settings, errors, and round trips over generated schemas and values."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import data as d
from odradek.connect.config import ConfigError
from odradek.connect.converters.json import JsonConverter
from odradek.connect.converters.logical import decimal_to_bytes
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema


def conv(**props: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(props, False)
    return c


PERSON = d.struct(("id", Schema(d.INT64)), ("name", Schema(d.STRING, optional=True)),
                  name="Person")


def test_envelope_with_struct_schema_is_kafkas_json() -> None:
    out = conv().from_connect_data("t", PERSON, {"id": 7, "name": "ann"})
    assert out is not None
    assert json.loads(out) == {
        "schema": {"type": "struct", "fields": [
            {"type": "int64", "optional": False, "field": "id"},
            {"type": "string", "optional": True, "field": "name"}],
            "optional": False, "name": "Person"},
        "payload": {"id": 7, "name": "ann"}}
    assert b" " not in out


def test_reads_kafka_written_envelope() -> None:
    raw = (b'{"schema":{"type":"struct","fields":[{"type":"float","optional":false,'
           b'"field":"f"},{"type":"double","optional":true,"field":"g"},{"type":"bytes",'
           b'"optional":false,"field":"b"},{"type":"map","keys":{"type":"string",'
           b'"optional":false},"values":{"type":"int32","optional":false},"optional":false,'
           b'"field":"m"},{"type":"array","items":{"type":"int8","optional":false},'
           b'"optional":false,"field":"a"}],"optional":false,"name":"r","version":2,'
           b'"doc":"d","parameters":{"k":"v"}},'
           b'"payload":{"f":1.5,"g":null,"b":"AAE=","m":{"x":1},"a":[1,2]}}')
    schema, value = conv().to_connect_data("t", raw)
    assert schema is not None and schema.type == d.STRUCT
    assert [f.schema.type for f in schema.fields] == [d.FLOAT32, d.FLOAT64, d.BYTES, d.MAP,
                                                       d.ARRAY]
    assert (schema.name, schema.version, schema.doc, schema.parameters) == (
        "r", 2, "d", {"k": "v"})
    assert value == {"f": 1.5, "g": None, "b": b"\x00\x01", "m": {"x": 1}, "a": [1, 2]}


def test_null_schema_is_written_in_envelope_and_tombstone_is_none() -> None:
    c = conv()
    assert json.loads(c.from_connect_data("t", None, {"a": [1, "x"]}) or b"") == {
        "schema": None, "payload": {"a": [1, "x"]}}
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None) == (None, None)


def test_schemas_disabled_is_plain_json_both_ways() -> None:
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", PERSON, {"id": 1, "name": None}) == \
        b'{"id":1,"name":null}'
    assert c.to_connect_data("t", b'{"a":1.25,"b":[true,null],"c":"AAE="}') == (
        None, {"a": 1.25, "b": [True, None], "c": "AAE="})
    assert c.from_connect_data("t", None, b"\x00\x01") == b'"AAE="'


def test_envelope_required_when_schemas_enabled() -> None:
    with pytest.raises(DataError, match='requires "schema" and "payload"'):
        conv().to_connect_data("t", b'{"id":1}')
    with pytest.raises(DataError, match="serialization error"):
        conv().to_connect_data("t", b"{nope")


def test_decimal_base64_and_numeric() -> None:
    schema = Schema(d.BYTES, name=d.DECIMAL, parameters={"scale": "2"})
    base64_out = conv().from_connect_data("t", schema, decimal.Decimal("-1.28"))
    assert json.loads(base64_out or b"")["payload"] == "gA=="
    numeric = conv(**{"decimal.format": "NUMERIC"})
    out = numeric.from_connect_data("t", schema, decimal.Decimal("12345678901234567890.12"))
    assert out is not None and out.endswith(b'"payload":12345678901234567890.12}')
    for c in (conv(), numeric):
        assert c.to_connect_data("t", out)[1] == decimal.Decimal("12345678901234567890.12")
        assert c.to_connect_data("t", base64_out)[1] == decimal.Decimal("-1.28")
    assert decimal_to_bytes(decimal.Decimal(128), 0) == b"\x00\x80"
    with pytest.raises(DataError, match="scale"):
        conv().from_connect_data("t", schema, decimal.Decimal("1.234"))


def test_date_time_timestamp_payloads() -> None:
    s = d.struct(("d", Schema(d.INT32, name=d.DATE)), ("t", Schema(d.INT32, name=d.TIME)),
                 ("ts", Schema(d.INT64, name=d.TIMESTAMP)))
    value = {"d": dt.date(1970, 1, 11), "t": dt.time(0, 0, 1, 500_000),
             "ts": dt.datetime(2001, 9, 9, 1, 46, 40, tzinfo=dt.UTC)}
    out = conv().from_connect_data("t", s, value)
    assert json.loads(out or b"")["payload"] == {"d": 10, "t": 1500, "ts": 1_000_000_000_000}
    assert conv().to_connect_data("t", out)[1] == value


def test_replace_null_with_default() -> None:
    s = d.struct(("n", Schema(d.INT32, optional=True, default=5)))
    out = conv().from_connect_data("t", s, {"n": None})
    assert json.loads(out or b"")["schema"]["fields"][0]["default"] == 5
    assert json.loads(out or b"")["payload"] == {"n": 5}
    keep = conv(**{"replace.null.with.default": "false"})
    out2 = keep.from_connect_data("t", s, {"n": None})
    assert json.loads(out2 or b"")["payload"] == {"n": None}
    assert keep.to_connect_data("t", out2)[1] == {"n": None}
    assert conv().to_connect_data("t", out2)[1] == {"n": 5}


def test_required_null_and_type_mismatch_are_data_errors() -> None:
    with pytest.raises(DataError, match="null value"):
        conv().from_connect_data("t", PERSON, {"id": None})
    with pytest.raises(DataError):
        conv().from_connect_data("t", Schema(d.INT8), 300)
    with pytest.raises(DataError):
        conv().from_connect_data("t", Schema(d.STRING), 3)
    with pytest.raises(DataError, match="Unknown schema type"):
        conv().to_connect_data("t", b'{"schema":{"type":"int128"},"payload":1}')
    with pytest.raises(DataError):
        conv().to_connect_data("t", b'{"schema":{"type":"int32"},"payload":"x"}')


def test_map_with_non_string_keys_is_pairs() -> None:
    s = Schema(d.MAP, key_schema=Schema(d.INT32), value_schema=Schema(d.STRING))
    out = conv().from_connect_data("t", s, {1: "a", 2: "b"})
    assert json.loads(out or b"")["payload"] == [[1, "a"], [2, "b"]]
    assert conv().to_connect_data("t", out)[1] == {1: "a", 2: "b"}


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ConfigError) as e:
        conv(**{"decimal.format": "HEX"})
    assert e.value.name == "decimal.format"
    with pytest.raises(ConfigError) as e:
        conv(**{"schemas.enable": "maybe"})
    assert e.value.name == "schemas.enable"


# -- round trips -------------------------------------------------------------

_INT_BITS = {d.INT8: 8, d.INT16: 16, d.INT32: 32, d.INT64: 64}


def _leaf_schemas() -> st.SearchStrategy[Schema]:
    plain = st.sampled_from([d.INT8, d.INT16, d.INT32, d.INT64, d.FLOAT64, d.BOOLEAN,
                             d.STRING, d.BYTES]).map(Schema)
    logical = st.sampled_from([
        Schema(d.BYTES, name=d.DECIMAL, parameters={"scale": "3"}),
        Schema(d.INT32, name=d.DATE), Schema(d.INT32, name=d.TIME),
        Schema(d.INT64, name=d.TIMESTAMP)])
    return st.one_of(plain, logical)


def _optional(s: Schema) -> st.SearchStrategy[Schema]:
    return st.sampled_from([s, s.as_optional()])


def schemas() -> st.SearchStrategy[Schema]:
    def extend(children: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        return st.one_of(
            children.map(lambda c: Schema(d.ARRAY, value_schema=c)),
            st.tuples(st.sampled_from([Schema(d.STRING), Schema(d.INT32)]), children).map(
                lambda kv: Schema(d.MAP, key_schema=kv[0], value_schema=kv[1])),
            st.lists(st.tuples(st.text("abcxyz_", min_size=1, max_size=4), children),
                     min_size=1, max_size=4, unique_by=lambda t: t[0]).map(
                lambda fs: d.struct(*fs, name="s")))
    return st.recursive(_leaf_schemas().flatmap(_optional), extend, max_leaves=8) \
        .flatmap(_optional)


def values(s: Schema) -> st.SearchStrategy[Any]:
    base = _values(s)
    return st.one_of(st.none(), base) if s.optional else base


def _values(s: Schema) -> st.SearchStrategy[Any]:
    if s.name == d.DECIMAL:
        return st.integers(-(10 ** 20), 10 ** 20).map(lambda n: decimal.Decimal(n)
                                                        .scaleb(-3))
    if s.name == d.DATE:
        return st.dates()
    if s.name == d.TIME:
        return st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
    if s.name == d.TIMESTAMP:
        return st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 1, 1)
                            ).map(lambda t: t.replace(
                                microsecond=t.microsecond // 1000 * 1000, tzinfo=dt.UTC))
    if s.type in _INT_BITS:
        bits = _INT_BITS[s.type]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if s.type == d.FLOAT64:
        return st.floats(allow_nan=False)
    if s.type == d.BOOLEAN:
        return st.booleans()
    if s.type == d.STRING:
        return st.text(max_size=8)
    if s.type == d.BYTES:
        return st.binary(max_size=8)
    if s.type == d.ARRAY:
        assert s.value_schema is not None
        return st.lists(values(s.value_schema), max_size=3)
    if s.type == d.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        return st.dictionaries(_values(s.key_schema), values(s.value_schema), max_size=3)
    return st.fixed_dictionaries({f.name: values(f.schema) for f in s.fields})


@given(st.data(), st.sampled_from(["BASE64", "NUMERIC"]))
def test_round_trip_with_schemas(data: st.DataObject, fmt: str) -> None:
    schema = data.draw(schemas())
    value = data.draw(values(schema))
    c = conv(**{"decimal.format": fmt})
    raw = c.from_connect_data("t", schema, value)
    if value is None:
        assert raw is not None  # a schema with a null value is not a tombstone
    back_schema, back = c.to_connect_data("t", raw)
    assert back_schema == schema
    assert back == value


def json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
    return st.recursive(leaves, lambda c: st.one_of(
        st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
        max_leaves=10)


@given(json_values(), st.booleans())
def test_round_trip_schemaless(value: Any, envelope: bool) -> None:
    c = conv(**{"schemas.enable": str(envelope).lower()})
    raw = c.from_connect_data("t", None, value)
    if value is None and raw is None:
        return
    assert c.to_connect_data("t", raw) == (None, value)

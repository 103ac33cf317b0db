"""HeaderFrom, InsertHeader, DropHeaders, RegexRouter, Filter and the predicates."""

from __future__ import annotations

import pytest

from odradek.connect import data as d
from odradek.connect.config import ConfigError
from odradek.connect.data import Header, Schema

from .helpers import T, make, record

S = d.struct(("id", Schema(d.INT32)), ("region", Schema(d.STRING)))


def test_header_from_copy_and_move() -> None:
    copy = make(T("HeaderFrom$Value"), fields="region", headers="r", operation="copy")
    out = copy.apply(record({"id": 1, "region": "eu"}, S, headers=(Header("a", "b"),)))
    assert out.headers == (Header("a", "b"), Header("r", "eu", Schema(d.STRING)))
    assert out.value == {"id": 1, "region": "eu"} and out.value_schema == S
    move = make(T("HeaderFrom$Value"), fields="region,id", headers="r,i", operation="move")
    out = move.apply(record({"id": 1, "region": "eu"}, S))
    assert [(h.key, h.value) for h in out.headers] == [("r", "eu"), ("i", 1)]
    assert out.value == {} and out.value_schema.fields == ()
    key = make(T("HeaderFrom$Key"), fields="k", headers="hk", operation="move")
    out = key.apply(record(None, key={"k": 9, "z": 0}))
    assert out.key == {"z": 0} and out.headers == (Header("hk", 9),)


def test_header_from_bad_config() -> None:
    with pytest.raises(ConfigError) as e:
        make(T("HeaderFrom$Value"), fields="a,b", headers="x", operation="copy")
    assert e.value.name == "headers"
    with pytest.raises(ConfigError) as e:
        make(T("HeaderFrom$Value"), fields="a", headers="x", operation="steal")
    assert e.value.name == "operation"


def test_insert_and_drop_headers() -> None:
    ins = make(T("InsertHeader"), header="v", **{"value.literal": "42"})
    out = ins.apply(record(1))
    assert out.headers == (Header("v", 42, Schema(d.INT8)),)
    text = make(T("InsertHeader"), header="src", **{"value.literal": "db one"})
    assert text.apply(record(1)).headers[0].value == "db one"
    drop = make(T("DropHeaders"), headers="a,c")
    out = drop.apply(record(1, headers=(Header("a", 1), Header("b", 2), Header("a", 3))))
    assert out.headers == (Header("b", 2),)
    with pytest.raises(ConfigError) as e:
        make(T("InsertHeader"), header="x")
    assert e.value.name == "value.literal"
    with pytest.raises(ConfigError) as e:
        make(T("DropHeaders"), headers="")
    assert e.value.name == "headers"


def test_regex_router() -> None:
    t = make(T("RegexRouter"), regex=r"(?<db>\w+)\.(\w+)", replacement="${db}-$2-\\$")
    assert t.apply(record(1, topic="shop.orders")).topic == "shop-orders-$"
    assert t.apply(record(1, topic="plain")).topic == "plain"
    with pytest.raises(ConfigError) as e:
        make(T("RegexRouter"), regex="(", replacement="x")
    assert e.value.name == "regex"
    with pytest.raises(ConfigError) as e:
        make(T("RegexRouter"), regex="x")
    assert e.value.name == "replacement"


def test_filter_drops_everything() -> None:
    assert make(T("Filter")).apply(record(1)) is None


def test_predicates() -> None:
    p = "org.apache.kafka.connect.transforms.predicates."
    topic = make(p + "TopicNameMatches", pattern="ord.*")
    assert topic.test(record(1)) and not topic.test(record(1, topic="x-orders"))
    has = make(p + "HasHeaderKey", name="h")
    assert has.test(record(1, headers=(Header("h", None),))) and not has.test(record(1))
    tomb = make(p + "RecordIsTombstone")
    assert tomb.test(record(None)) and not tomb.test(record(0))
    with pytest.raises(ConfigError) as e:
        make(p + "TopicNameMatches", pattern="[")
    assert e.value.name == "pattern"
    with pytest.raises(ConfigError) as e:
        make(p + "HasHeaderKey")
    assert e.value.name == "name"


def test_header_from_refuses_a_tombstone_as_kafka_does() -> None:
    from odradek.connect.converters.simple import DataError

    t = make(T("HeaderFrom$Value"), fields="a", headers="h", operation="copy")
    with pytest.raises(DataError, match="Only Map"):
        t.apply(record(None))

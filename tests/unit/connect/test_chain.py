"""The transform chain from a connector's settings: order, predicates,
negation, dropping, validation naming the bad setting, plugin names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.connect import plugins
from odradek.connect.config import ConfigError
from odradek.connect.data import ConnectRecord, Header
from odradek.connect.transforms import BUILTIN
from odradek.connect.transforms.base import Predicate, Transformation
from odradek.connect.transforms.chain import TransformChain, validate_transforms

from .helpers import record

PROPS = {
    "transforms": "insert, route, drop",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "src",
    "transforms.insert.static.value": "db",
    "transforms.insert.predicate": "notTomb",
    "transforms.insert.negate": "true",
    "transforms.route.type": "RegexRouter",
    "transforms.route.regex": "(.*)s",
    "transforms.route.replacement": "$1",
    "transforms.drop.type": "Filter",
    "transforms.drop.predicate": "hasSkip",
    "predicates": "notTomb,hasSkip",
    "predicates.notTomb.type": "org.apache.kafka.connect.transforms.predicates."
                               "RecordIsTombstone",
    "predicates.hasSkip.type": "HasHeaderKey",
    "predicates.hasSkip.name": "skip",
}


def test_chain_applies_in_order_with_predicates() -> None:
    chain = TransformChain.from_props(PROPS)
    out = chain.apply(record({"a": 1}))
    assert out is not None and out.topic == "order" and out.value == {"a": 1, "src": "db"}
    tomb = chain.apply(record(None))
    assert tomb is not None and tomb.value is None and tomb.topic == "order"
    assert chain.apply(record({"a": 1}, headers=(Header("skip", None),))) is None
    assert [s.class_name for s in chain.stages] == [
        "org.apache.kafka.connect.transforms.InsertField$Value", "RegexRouter", "Filter"]
    chain.close()


def test_chain_runs_each_stage_through_runner() -> None:
    seen: list[str] = []

    def run(name: str, thunk: Callable[[], ConnectRecord | None]) -> ConnectRecord | None:
        seen.append(name)
        return thunk()

    TransformChain.from_props(PROPS).apply(record({"a": 1}), run)
    assert seen == ["org.apache.kafka.connect.transforms.InsertField$Value", "RegexRouter"]


def test_empty_chain_is_identity() -> None:
    r = record(1)
    assert TransformChain.from_props({}).apply(r) is r
    assert validate_transforms({}) == {}
    assert validate_transforms(PROPS) == {}


@pytest.mark.parametrize("change,bad_key", [
    ({"transforms.route.type": ""}, "transforms.route.type"),
    ({"transforms.route.type": "NoSuchTransform"}, "transforms.route.type"),
    ({"transforms.route.type": "HasHeaderKey"}, "transforms.route.type"),
    ({"transforms.route.regex": "("}, "transforms.route.regex"),
    ({"transforms.drop.predicate": "nope"}, "transforms.drop.predicate"),
    ({"transforms.insert.negate": "perhaps"}, "transforms.insert.negate"),
    ({"predicates.hasSkip.name": ""}, "predicates.hasSkip.name"),
    ({"predicates.hasSkip.type": "Filter"}, "predicates.hasSkip.type"),
    ({"transforms": "a,a"}, "transforms"),
])
def test_bad_settings_are_named(change: dict[str, str], bad_key: str) -> None:
    props = {**PROPS, **change}
    errors = validate_transforms(props)
    assert list(errors) == [bad_key] and errors[bad_key]
    with pytest.raises(ConfigError) as e:
        TransformChain.from_props(props)
    assert e.value.name == bad_key


def test_validate_lists_every_bad_setting() -> None:
    errors = validate_transforms({"transforms": "a,b", "transforms.a.type": "Cast$Value",
                                  "transforms.b.type": "ExtractField$Key"})
    assert set(errors) == {"transforms.a.spec", "transforms.b.field"}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_loads_as_its_kind(name: str) -> None:
    cls = plugins.load(name)
    kind = Predicate if ".predicates." in name else Transformation
    assert issubclass(cls, kind)
    if name.endswith("$Key"):
        assert cls.IS_KEY is True
    if name.endswith("$Value"):
        assert cls.IS_KEY is False

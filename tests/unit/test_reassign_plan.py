"""``odradek reassign``'s plan files and decisions (odradek.cli.reassign_plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.cli.common import CliError
from odradek.cli.reassign_plan import parse_plan, parse_topics, plan_json, propose, throttles


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_plan_round_trips_through_kafkas_format(tmp_path: Path) -> None:
    doc = {"version": 1, "partitions": [
        {"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 0, "replicas": [2]}]}
    plan = parse_plan(_write(tmp_path, doc))
    assert plan == {("b", 1): [3, 1], ("a", 0): [2]}
    assert json.loads(plan_json(plan)) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
        {"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}


@pytest.mark.parametrize(("doc", "message"), [
    ("{nope", "not valid JSON"),
    ({"version": 1}, "expected"),
    ({"version": 1, "partitions": []}, "cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": "0", "replicas": [1]}]},
     "each partition needs"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]},
     "duplicate entries"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]},
                                   {"topic": "a", "partition": 0, "replicas": [2]}]},
     "duplicate topic partitions: a-0"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": []}]},
     "cannot be empty: a-0"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 2],
                                    "log_dirs": ["any"]}]}, "one directory per replica"),
    ({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1],
                                    "log_dirs": ["/d1"]}]}, "not supported"),
])
def test_bad_plans_are_refused_in_one_line(tmp_path: Path, doc: object, message: str) -> None:
    with pytest.raises(CliError, match=message) as info:
        parse_plan(_write(tmp_path, doc))
    assert "\n" not in str(info.value)


def test_throttles_as_kafka_computes_them() -> None:
    """Leader list: the current replicas; follower list: the added ones; the
    brokers: all of both. An unchanged partition is left out."""
    current = {("t", 0): [101, 102], ("t", 1): [1, 2], ("u", 0): [1]}
    target = {("t", 0): [102, 103], ("t", 1): [2, 1], ("u", 0): [2]}
    out = throttles(current, target)
    assert out.leader == {"t": "0:101,0:102", "u": "0:1"}
    assert out.follower == {"t": "0:103", "u": "0:2"}
    assert out.brokers == [1, 2, 101, 102, 103]


def test_propose_is_round_robin_and_keeps_the_replication_factor() -> None:
    current = {("a", 0): [1, 2], ("a", 1): [2, 1], ("b", 0): [1]}
    assert propose(current, [5, 6]) == {("a", 0): [5, 6], ("a", 1): [6, 5], ("b", 0): [6]}
    with pytest.raises(CliError, match="larger than available brokers"):
        propose({("a", 0): [1, 2, 3]}, [5, 6])


def test_topics_to_move(tmp_path: Path) -> None:
    assert parse_topics(_write(tmp_path, {"topics": [{"topic": "a"}, {"topic": "b"}],
                                          "version": 1})) == ["a", "b"]
    with pytest.raises(CliError, match="at least one topic"):
        parse_topics(_write(tmp_path, {"topics": [], "version": 1}))

"""Status topic records and the latest-status state."""

from __future__ import annotations

import json
import logging

import pytest

from odradek.connect.distributed.protocol import ConnectorTaskId
from odradek.connect.distributed.statusrecords import (
    Status,
    StatusState,
    TopicStatus,
    can_overwrite,
    connector_status_key,
    decode_status,
    decode_topic_status,
    encode_status,
    encode_topic_status,
    task_status_key,
    topic_status_key,
)

RUNNING = Status("RUNNING", None, "w1:8083", 3)


def test_keys() -> None:
    assert connector_status_key("my-conn") == "status-connector-my-conn"
    assert task_status_key(ConnectorTaskId("my-conn", 12)) == "status-task-my-conn-12"
    assert topic_status_key("orders", "my-conn") == "status-topic-orders:connector-my-conn"


def test_status_value_bytes_and_round_trip() -> None:
    assert encode_status(RUNNING) == \
        b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":3}'
    failed = Status("FAILED", "Traceback ...\nValueError: x", "w2:8083", 7)
    assert decode_status(encode_status(failed)) == failed


def test_topic_status_value_bytes_and_round_trip() -> None:
    status = TopicStatus("orders", "c", 2, 1_700_000_000_123)
    assert json.loads(encode_topic_status(status)) == {"topic": {
        "name": "orders", "connector": "c", "task": 2, "discoverTimestamp": 1_700_000_000_123}}
    assert decode_topic_status(encode_topic_status(status)) == status


@pytest.mark.parametrize("value", [
    b"nope", b"[]", b'{"state":"RUNNING"}',
    b'{"state":"SLEEPING","trace":null,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":3,"worker_id":"w","generation":1}',
    b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":"1"}',
])
def test_malformed_status_values_decode_to_none(value: bytes) -> None:
    assert decode_status(value) is None


def test_latest_status_per_connector_and_task() -> None:
    s = StatusState()
    assert s.apply(connector_status_key("c"), encode_status(RUNNING))
    task0 = ConnectorTaskId("c", 0)
    task1 = ConnectorTaskId("c", 1)
    s.apply(task_status_key(task1), encode_status(Status("FAILED", "boom", "w2:8083", 3)))
    s.apply(task_status_key(task0), encode_status(RUNNING))
    assert s.connector("c") == RUNNING
    assert s.task(task1) == Status("FAILED", "boom", "w2:8083", 3)
    assert list(s.tasks("c")) == [0, 1]
    assert s.connectors() == ["c"]
    assert s.connector("other") is None and s.tasks("other") == {}


def test_safe_writes_yield_to_a_newer_generation_of_another_worker() -> None:
    s = StatusState()
    task = ConnectorTaskId("c", 0)
    s.apply(task_status_key(task), encode_status(Status("RUNNING", None, "w2:8083", 5)))
    # A zombie from generation 4 must not overwrite the new owner's status.
    assert not s.can_write_safely(task, Status("UNASSIGNED", None, "w1:8083", 4))
    # The same worker may always overwrite its own; a newer (or equal) generation wins.
    assert s.can_write_safely(task, Status("UNASSIGNED", None, "w2:8083", 4))
    assert s.can_write_safely(task, Status("UNASSIGNED", None, "w3:8083", 5))
    assert s.can_write_safely(ConnectorTaskId("c", 1), Status("RUNNING", None, "w1:8083", 0))
    s.apply(connector_status_key("c"), encode_status(Status("RUNNING", None, "w2:8083", 5)))
    assert not s.can_write_safely("c", Status("FAILED", "x", "w1:8083", 4))
    assert s.can_write_safely("c", Status("FAILED", "x", "w1:8083", 6))


def test_reading_applies_records_in_log_order_even_across_a_generation_reset() -> None:
    s = StatusState()
    key = connector_status_key("c")
    s.apply(key, encode_status(Status("RUNNING", None, "old:8083", 50)))
    # The group was re-created: generations start again at 1.
    assert s.apply(key, encode_status(Status("RUNNING", None, "new:8083", 1)))
    assert s.connector("c") == Status("RUNNING", None, "new:8083", 1)
    assert not s.apply(key, encode_status(Status("RUNNING", None, "new:8083", 1)))  # no change


def test_can_overwrite_rule() -> None:
    assert can_overwrite(None, RUNNING)
    assert can_overwrite(RUNNING, Status("FAILED", None, "w1:8083", 1))
    assert not can_overwrite(RUNNING, Status("FAILED", None, "w9:8083", 2))
    assert can_overwrite(RUNNING, Status("FAILED", None, "w9:8083", 3))


def test_tombstones_remove() -> None:
    s = StatusState()
    s.apply(connector_status_key("c"), encode_status(RUNNING))
    s.apply(connector_status_key("d"), encode_status(RUNNING))
    for task in (ConnectorTaskId("c", 0), ConnectorTaskId("c", 1), ConnectorTaskId("d", 0)):
        s.apply(task_status_key(task), encode_status(RUNNING))
    assert s.apply(task_status_key(ConnectorTaskId("c", 1)), None)
    assert list(s.tasks("c")) == [0]
    # A connector's tombstone takes its tasks' statuses with it.
    assert s.apply(connector_status_key("c"), None)
    assert not s.apply(connector_status_key("c"), None)
    assert s.connector("c") is None and s.tasks("c") == {}
    assert s.connectors() == ["d"] and list(s.tasks("d")) == [0]


def test_topics_of_a_connector() -> None:
    s = StatusState()
    for topic in ("orders", "a.b"):
        s.apply(topic_status_key(topic, "c"), encode_topic_status(TopicStatus(topic, "c", 0, 1)))
    odd = "x:connector-y"  # a connector name may hold the separator; a topic name cannot
    s.apply(topic_status_key("t", odd), encode_topic_status(TopicStatus("t", odd, 0, 1)))
    assert s.topics("c") == ["a.b", "orders"]
    assert s.topics(odd) == ["t"]
    assert s.apply(topic_status_key("orders", "c"), None)
    assert s.topics("c") == ["a.b"]


def test_malformed_records_are_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    s = StatusState()
    with caplog.at_level(logging.ERROR, logger="odradek.connect.distributed.statusrecords"):
        assert not s.apply(connector_status_key("c"), b"{")
        assert not s.apply("status-task-c-x", encode_status(RUNNING))
        assert not s.apply(topic_status_key("t", "c"), b'{"topic": 1}')
    assert len(caplog.records) == 3
    assert not s.apply("unrelated", b"{}")
    assert s.connectors() == [] and s.topics("c") == []

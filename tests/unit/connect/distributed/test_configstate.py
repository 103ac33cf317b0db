"""The config topic's state machine: every key, commit semantics, tombstones, bad values."""

from __future__ import annotations

import json
import logging

import pytest

from odradek.connect.distributed.configstate import (
    ConfigState,
    ConnectorConfigUpdated,
    ConnectorRemoved,
    RestartRequested,
    SessionKey,
    SessionKeyUpdated,
    TargetStateChanged,
    TaskCountRecorded,
    TasksCommitted,
    TasksInconsistent,
    connector_record,
    deleted,
    restart_record,
    session_key_record,
    target_state_record,
    task_count_record,
    task_records,
)


def j(value: object) -> bytes:
    return json.dumps(value).encode()


class Topic:
    """Feeds records to a ConfigState at increasing offsets."""

    def __init__(self) -> None:
        self.state = ConfigState()
        self.offset = 0

    def put(self, key: str, value: bytes | None) -> object:
        event = self.state.apply(self.offset, key, value)
        self.offset += 1
        return event

    def put_all(self, records: list[tuple[str, bytes]] | list[tuple[str, None]]) -> list[object]:
        return [self.put(k, v) for k, v in records]


def test_empty_state_offset_is_minus_one_then_next_offset() -> None:
    state = ConfigState()
    assert state.snapshot().offset == -1
    state.apply(41, "connector-a", j({"properties": {"k": "v"}}))
    assert state.snapshot().offset == 42


def test_connector_config_and_default_target_state() -> None:
    t = Topic()
    assert t.put(*connector_record("my-conn", {"connector.class": "X", "tasks.max": "2"})) \
        == ConnectorConfigUpdated("my-conn")
    snap = t.state.snapshot()
    assert dict(snap.connectors["my-conn"]) == {"connector.class": "X", "tasks.max": "2"}
    assert snap.target_states["my-conn"] == "STARTED"
    assert snap.task_configs["my-conn"] == ()
    assert snap.task_count("my-conn") == 0


def test_tasks_are_invisible_until_their_commit() -> None:
    t = Topic()
    t.put(*connector_record("c", {"a": "1"}))
    *tasks, commit = task_records("c", [{"t": "0"}, {"t": "1"}])
    assert t.put_all(tasks) == [None, None]
    assert t.state.snapshot().task_count("c") == 0
    assert t.put(*commit) == TasksCommitted("c", 2)
    snap = t.state.snapshot()
    assert [dict(c) for c in snap.task_configs["c"]] == [{"t": "0"}, {"t": "1"}]
    assert snap.task_count("c") == 2


def test_a_commit_of_fewer_tasks_than_buffered() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    for i in range(3):
        t.put(f"task-c-{i}", j({"properties": {"n": str(i)}}))
    assert t.put("commit-c", j({"tasks": 2})) == TasksCommitted("c", 2)
    assert [c["n"] for c in t.state.snapshot().task_configs["c"]] == ["0", "1"]


def test_a_smaller_generation_replaces_a_larger_one() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    t.put_all(task_records("c", [{"g": "1"}] * 4))
    t.put_all(task_records("c", [{"g": "2"}] * 2))
    assert [c["g"] for c in t.state.snapshot().task_configs["c"]] == ["2", "2"]


def test_compaction_leaving_tasks_without_their_commit_is_inconsistent() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    # The log was 0,1,2 + commit 3; compaction kept only task 2 of that round.
    t.put("task-c-2", j({"properties": {}}))
    t.put("task-c-1", j({"properties": {}}))
    assert t.put("commit-c", j({"tasks": 3})) == TasksInconsistent("c")
    snap = t.state.snapshot()
    assert snap.inconsistent == frozenset({"c"})
    assert snap.task_configs["c"] == () and snap.task_count("c") == 0
    # The leader writes a fresh complete set: consistent again.
    assert t.put_all(task_records("c", [{"x": "0"}, {"x": "1"}]))[-1] == TasksCommitted("c", 2)
    snap = t.state.snapshot()
    assert snap.inconsistent == frozenset()
    assert snap.task_count("c") == 2


def test_buffered_tasks_are_dropped_by_an_inconsistent_commit() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    t.put("task-c-1", j({"properties": {}}))
    t.put("commit-c", j({"tasks": 2}))
    t.put("task-c-0", j({"properties": {}}))
    # Task 1 from before the failed commit must not count towards this one.
    assert t.put("commit-c", j({"tasks": 2})) == TasksInconsistent("c")


def test_connector_tombstone_removes_everything_of_it() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    t.put_all(task_records("c", [{}]))
    t.put(*target_state_record("c", "PAUSED"))
    events = t.put_all(deleted("c"))
    assert events == [ConnectorRemoved("c"), None]
    snap = t.state.snapshot()
    assert "c" not in snap.connectors and "c" not in snap.task_configs
    assert "c" not in snap.target_states
    # A re-created connector starts clean.
    t.put(*connector_record("c", {}))
    assert t.state.snapshot().task_count("c") == 0
    assert t.state.snapshot().target_state("c") == "STARTED"


@pytest.mark.parametrize(("state", "written"), [
    ("STARTED", {"state": "STARTED", "state.v2": "STARTED"}),
    ("PAUSED", {"state": "PAUSED", "state.v2": "PAUSED"}),
    ("STOPPED", {"state": "PAUSED", "state.v2": "STOPPED"}),
])
def test_target_states_round_trip(state: str, written: dict[str, str]) -> None:
    key, value = target_state_record("c", state)
    assert key == "target-state-c"
    assert json.loads(value) == written
    t = Topic()
    t.put(*connector_record("c", {}))
    assert t.put(key, value) == TargetStateChanged("c", state)
    assert t.state.snapshot().target_states["c"] == state


def test_target_state_falls_back_to_state_and_tombstone_resets() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    assert t.put("target-state-c", j({"state": "PAUSED"})) == TargetStateChanged("c", "PAUSED")
    assert t.put("target-state-c", j({"state": "PAUSED", "state.v2": "LATER"})) \
        == TargetStateChanged("c", "PAUSED")
    assert t.put("target-state-c", None) is None
    assert t.state.snapshot().target_states["c"] == "STARTED"
    with pytest.raises(ValueError, match="target state"):
        target_state_record("c", "RUNNING")


def test_restart_requests() -> None:
    t = Topic()
    key, value = restart_record("c", include_tasks=True, only_failed=False)
    assert (key, json.loads(value)) == ("restart-connector-c",
                                        {"include-tasks": True, "only-failed": False})
    assert t.put(key, value) == RestartRequested("c", True, False)
    assert t.put("restart-connector-c", j({})) == RestartRequested("c", False, False)
    assert t.put("restart-connector-c", None) is None


def test_task_count_records() -> None:
    t = Topic()
    key, value = task_count_record("c", 3)
    assert (key, json.loads(value)) == ("tasks-fencing-c", {"task-count": 3})
    assert t.put(key, value) == TaskCountRecorded("c", 3)
    assert dict(t.state.snapshot().task_count_records) == {"c": 3}
    t.put("tasks-fencing-c", None)
    assert dict(t.state.snapshot().task_count_records) == {}


def test_session_key() -> None:
    t = Topic()
    key = SessionKey(b"\x00\x01secret", "HmacSHA256", 1_700_000_000_000)
    k, value = session_key_record(key)
    assert k == "session-key"
    assert json.loads(value) == {"key": "AAFzZWNyZXQ=", "algorithm": "HmacSHA256",
                                 "creation-timestamp": 1_700_000_000_000}
    assert t.put(k, value) == SessionKeyUpdated(key)
    assert t.state.snapshot().session_key == key


def test_encoders_write_compact_json_like_kafka() -> None:
    assert connector_record("c", {"a": "b"}) == ("connector-c", b'{"properties":{"a":"b"}}')
    assert task_records("c", [{"x": "1"}]) == [("task-c-0", b'{"properties":{"x":"1"}}'),
                                               ("commit-c", b'{"tasks":1}')]
    assert task_records("c", []) == [("commit-c", b'{"tasks":0}')]
    assert deleted("c") == [("connector-c", None), ("target-state-c", None)]


def test_connector_names_with_dashes() -> None:
    t = Topic()
    t.put(*connector_record("my-pg-source", {}))
    t.put_all(task_records("my-pg-source", [{}] * 12))
    assert t.state.snapshot().task_count("my-pg-source") == 12


@pytest.mark.parametrize(("key", "value"), [
    ("connector-c", b"{not json"),
    ("connector-c", b"\xff\xfe"),
    ("connector-c", j(["properties"])),
    ("connector-c", j({"properties": "a=b"})),
    ("task-c", j({"properties": {}})),
    ("task-c-x", j({"properties": {}})),
    ("task-c-0", j({"config": {}})),
    ("commit-c", j({"tasks": "2"})),
    ("commit-c", j({"tasks": -1})),
    ("commit-c", j({"tasks": True})),
    ("target-state-c", j({"state": "RUNNING"})),
    ("restart-connector-c", j({"include-tasks": "yes"})),
    ("tasks-fencing-c", j({"count": 2})),
    ("session-key", j({"key": "!!", "algorithm": "HmacSHA256", "creation-timestamp": 1})),
    ("session-key", j({"key": "AA==", "algorithm": "HmacSHA256"})),
])
def test_malformed_values_are_logged_and_skipped(key: str, value: bytes,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    t = Topic()
    t.put(*connector_record("c", {"keep": "me"}))
    t.put_all(task_records("c", [{"t": "0"}]))
    before = t.state.snapshot()
    with caplog.at_level(logging.ERROR, logger="odradek.connect.distributed.configstate"):
        assert t.put(key, value) is None
    assert any(key in r.getMessage() for r in caplog.records)
    after = t.state.snapshot()
    assert after.offset == before.offset + 1
    assert after.connectors == before.connectors
    assert after.task_configs == before.task_configs
    assert after.target_states == before.target_states


def test_unknown_keys_and_odd_tombstones_are_ignored() -> None:
    t = Topic()
    t.put(*connector_record("c", {}))
    t.put_all(task_records("c", [{}]))
    assert t.put("logger-cluster-org.apache", j({"level": "DEBUG"})) is None
    assert t.put("something-else", None) is None
    assert t.put("task-c-0", None) is None
    assert t.put("commit-c", None) is None
    assert t.put("session-key", None) is None
    assert t.state.snapshot().task_count("c") == 1


def test_snapshots_are_read_only_and_independent() -> None:
    t = Topic()
    t.put(*connector_record("c", {"a": "1"}))
    snap = t.state.snapshot()
    with pytest.raises(TypeError):
        snap.connectors["c"]["a"] = "2"  # type: ignore[index]
    t.put(*connector_record("c", {"a": "2"}))
    assert snap.connectors["c"]["a"] == "1"
    assert t.state.snapshot().connectors["c"]["a"] == "2"


def test_assignable_work_for_the_assignor() -> None:
    t = Topic()
    t.put(*connector_record("b", {}))
    t.put_all(task_records("b", [{}, {}, {}]))
    t.put(*connector_record("a", {}))
    t.put(*target_state_record("a", "STOPPED"))
    t.put("task-x-0", j({"properties": {}}))  # tasks of a connector that does not exist
    t.put("commit-x", j({"tasks": 1}))
    assert t.state.snapshot().assignable() == {"a": 0, "b": 3}


def test_tasks_committed_before_their_connector_s_config_count_once_it_arrives() -> None:
    t = Topic()
    t.put_all(task_records("c", [{"n": "0"}]))
    assert "c" not in t.state.snapshot().task_configs
    t.put(*connector_record("c", {}))
    assert t.state.snapshot().task_count("c") == 1

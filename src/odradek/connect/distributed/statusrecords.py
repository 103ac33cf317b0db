"""The status topic's records, and the latest status per connector and task.

Keys are UTF-8 strings, values schemaless JSON (null = tombstone: the status
is gone, e.g. the connector was deleted):

=========================================  =====================================
key                                        value
=========================================  =====================================
``status-connector-<c>``                   ``{"state": s, "trace": str|null,
                                           "worker_id": "host:port",
                                           "generation": int}``
``status-task-<c>-<n>``                    the same
``status-topic-<topic>:connector-<c>``     ``{"topic": {"name": topic,
                                           "connector": c, "task": n,
                                           "discoverTimestamp": ms}}`` (KIP-558)
=========================================  =====================================

``state`` is one of UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING,
DESTROYED, STOPPED. ``generation`` is the group generation in which the
worker wrote it. A worker that fell out of the group may still write a stale
status; as Kafka's ``KafkaStatusBackingStore`` does, a status from another
worker with an older generation than the one held is ignored
(:func:`can_overwrite`); the same worker may always overwrite its own.
Malformed records are logged and skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from odradek.connect.distributed.protocol import ConnectorTaskId

log = logging.getLogger("odradek.connect.distributed.statusrecords")

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "DESTROYED", "STOPPED")


@dataclass(frozen=True)
class Status:
    """A connector's or task's state as one worker reported it."""

    state: str
    trace: str | None
    worker_id: str
    generation: int


@dataclass(frozen=True)
class TopicStatus:
    """A topic a connector's task has used (KIP-558)."""

    topic: str
    connector: str
    task: int
    discover_timestamp_ms: int


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def connector_status_key(connector: str) -> str:
    return CONNECTOR_STATUS_PREFIX + connector


def task_status_key(task: ConnectorTaskId) -> str:
    return f"{TASK_STATUS_PREFIX}{task.connector}-{task.task}"


def topic_status_key(topic: str, connector: str) -> str:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}"


def encode_status(status: Status) -> bytes:
    return _json({"state": status.state, "trace": status.trace,
                  "worker_id": status.worker_id, "generation": status.generation})


def decode_status(value: bytes) -> Status | None:
    """The status in a record value, or None if it is malformed."""
    try:
        d = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(d, dict):
        return None
    state, trace, worker, generation = (d.get("state"), d.get("trace"), d.get("worker_id"),
                                        d.get("generation"))
    if state not in STATES or not isinstance(worker, str) \
            or not (trace is None or isinstance(trace, str)) \
            or isinstance(generation, bool) or not isinstance(generation, int):
        return None
    return Status(str(state), trace, worker, generation)


def encode_topic_status(status: TopicStatus) -> bytes:
    return _json({"topic": {"name": status.topic, "connector": status.connector,
                            "task": status.task,
                            "discoverTimestamp": status.discover_timestamp_ms}})


def decode_topic_status(value: bytes) -> TopicStatus | None:
    """The topic status in a record value, or None if it is malformed."""
    try:
        d = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    t = d.get("topic") if isinstance(d, dict) else None
    if not isinstance(t, dict):
        return None
    name, connector, task, ts = (t.get("name"), t.get("connector"), t.get("task"),
                                 t.get("discoverTimestamp"))
    if not isinstance(name, str) or not isinstance(connector, str) \
            or isinstance(task, bool) or not isinstance(task, int) \
            or isinstance(ts, bool) or not isinstance(ts, int):
        return None
    return TopicStatus(name, connector, task, ts)


def parse_task_key(rest: str) -> ConnectorTaskId | None:
    """``<c>-<n>`` (the part after ``status-task-``) -> its task id, or None."""
    name, sep, number = rest.rpartition("-")
    if not sep or not name or not number.isdigit():
        return None
    return ConnectorTaskId(name, int(number))


def can_overwrite(current: Status | None, new: Status) -> bool:
    """Kafka's rule: the same worker, or a generation at least as new, wins."""
    return current is None or current.worker_id == new.worker_id \
        or current.generation <= new.generation


class StatusState:
    """The latest status of every connector and task read from the status topic."""

    def __init__(self) -> None:
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[ConnectorTaskId, Status] = {}
        self._topics: dict[tuple[str, str], TopicStatus] = {}

    def apply(self, key: str, value: bytes | None) -> bool:
        """Apply one record; True if it changed what this state holds."""
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            name = key[len(CONNECTOR_STATUS_PREFIX):]
            return self._put(self._connectors, name, key, value)
        if key.startswith(TASK_STATUS_PREFIX):
            task = parse_task_key(key[len(TASK_STATUS_PREFIX):])
            if task is None:
                log.error("status topic: bad task key %r; skipped", key)
                return False
            return self._put(self._tasks, task, key, value)
        if key.startswith(TOPIC_STATUS_PREFIX) and TOPIC_STATUS_SEPARATOR in key:
            topic, _, connector = key[len(TOPIC_STATUS_PREFIX):].rpartition(TOPIC_STATUS_SEPARATOR)
            if value is None:
                return self._topics.pop((connector, topic), None) is not None
            status = decode_topic_status(value)
            if status is None:
                log.error("status topic key %r: malformed value %.200r; skipped", key, value)
                return False
            self._topics[(connector, topic)] = status
            return True
        log.debug("status topic: ignoring record with key %r", key)
        return False

    @staticmethod
    def _put(table: dict[Any, Status], ident: Any, key: str, value: bytes | None) -> bool:
        if value is None:
            return table.pop(ident, None) is not None
        status = decode_status(value)
        if status is None:
            log.error("status topic key %r: malformed value %.200r; skipped", key, value)
            return False
        if not can_overwrite(table.get(ident), status):
            log.debug("status topic key %r: stale write from %s (generation %d) ignored",
                      key, status.worker_id, status.generation)
            return False
        table[ident] = status
        return True

    def connector(self, name: str) -> Status | None:
        return self._connectors.get(name)

    def task(self, task: ConnectorTaskId) -> Status | None:
        return self._tasks.get(task)

    def tasks(self, connector: str) -> dict[int, Status]:
        """Task number -> status for one connector, in task order."""
        found = {t.task: s for t, s in self._tasks.items() if t.connector == connector}
        return dict(sorted(found.items()))

    def connectors(self) -> list[str]:
        """Every connector with a connector status, sorted."""
        return sorted(self._connectors)

    def topics(self, connector: str) -> list[str]:
        """The topics a connector has used, sorted."""
        return sorted(t for c, t in self._topics if c == connector)

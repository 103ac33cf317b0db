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
DESTROYED, STOPPED (a DESTROYED status is written as a tombstone).
``generation`` is the group generation in which the worker wrote it.

Stale writes: a worker that fell out of the group may still try to write a
status for work that has moved on. As in Kafka's ``KafkaStatusBackingStore``
the guard is on the *writing* side: before a "safe" write (e.g. UNASSIGNED on
shutdown) the herder asks :meth:`StatusState.can_write_safely`, which refuses
a status from another worker with an older generation than the one held; the
same worker may always overwrite its own. Reading applies every record in log
order, as Kafka does: generations restart at 1 when a group is re-created, so
a reader that dropped "older" generations could hide every new status behind
one left over from the previous group. A connector's tombstone also removes
its tasks' statuses. Malformed records are logged and skipped.
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
    """Kafka's safe-write rule: nothing held, the same worker, or a generation
    at least as new."""
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
            # Topic names cannot hold ':'; connector names can: split at the first.
            topic, _, connector = key[len(TOPIC_STATUS_PREFIX):].partition(TOPIC_STATUS_SEPARATOR)
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

    def _put(self, table: dict[Any, Status], ident: Any, key: str, value: bytes | None) -> bool:
        if value is None:
            if table is self._connectors:
                for task in [t for t in self._tasks if t.connector == ident]:
                    del self._tasks[task]
            return table.pop(ident, None) is not None
        status = decode_status(value)
        if status is None:
            log.error("status topic key %r: malformed value %.200r; skipped", key, value)
            return False
        changed = table.get(ident) != status
        table[ident] = status
        return changed

    def can_write_safely(self, ident: str | ConnectorTaskId, status: Status) -> bool:
        """Whether a safe write of ``status`` for a connector (name) or task may go out.

        False when the status held came from another worker in a newer
        generation: that worker owns it now.
        """
        held = self._tasks.get(ident) if isinstance(ident, ConnectorTaskId) \
            else self._connectors.get(ident)
        return can_overwrite(held, status)

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

"""The config topic as a state machine, and the encoders of its records.

The config topic (one partition, compacted, read from the start by every
worker) holds Kafka Connect's records; keys are UTF-8 strings, values
schemaless JSON (compact, as Kafka's JsonConverter writes them), a null value
is a tombstone:

=============================  ==================================================
key                            value
=============================  ==================================================
``connector-<c>``              ``{"properties": {str: str}}``; null: deleted
``task-<c>-<n>``               ``{"properties": {str: str}}``; buffered until
                               the next ``commit-<c>``
``commit-<c>``                 ``{"tasks": N}``: tasks 0..N-1 of ``c`` become
                               visible together
``target-state-<c>``           ``{"state": "STARTED"|"PAUSED",
                               "state.v2": "STARTED"|"PAUSED"|"STOPPED"}``
                               (STOPPED written as ``state: PAUSED`` for old
                               workers; ``state.v2`` wins when valid)
``restart-connector-<c>``      ``{"include-tasks": bool, "only-failed": bool}``
``tasks-fencing-<c>``          ``{"task-count": N}`` (KIP-618)
``session-key``                ``{"key": base64, "algorithm": str,
                               "creation-timestamp": ms}`` (KIP-507)
=============================  ==================================================

Commit semantics (Kafka's ``KafkaConfigBackingStore``): task configs are
buffered per connector; a commit of N applies the buffer if it holds every
task 0..N-1 (it may hold more: compaction can leave a higher task of an older,
larger generation) and then empties it. A buffer missing one of 0..N-1 can
only come from compaction; the connector is then *inconsistent*: it shows no
tasks until a later commit is complete, and the leader must write fresh task
configs. Malformed keys or values are logged and skipped, never raised: one
bad record must not stop a worker from reading the topic.

:attr:`ConfigSnapshot.offset` is what a worker puts in its JoinGroup
``config_offset``: -1 before any record (as Kafka's empty snapshot), then the
offset of the last record applied plus one.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

log = logging.getLogger("odradek.connect.distributed.configstate")

STARTED = "STARTED"
PAUSED = "PAUSED"
STOPPED = "STOPPED"
TARGET_STATES = (STARTED, PAUSED, STOPPED)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
TASK_COUNT_PREFIX = "tasks-fencing-"
SESSION_KEY = "session-key"


# -- events: what a record changed, for the herder to act on -------------------

@dataclass(frozen=True)
class ConnectorConfigUpdated:
    connector: str


@dataclass(frozen=True)
class ConnectorRemoved:
    connector: str


@dataclass(frozen=True)
class TasksCommitted:
    """Tasks 0..``task_count``-1 of ``connector`` are now visible (a complete commit)."""

    connector: str
    task_count: int


@dataclass(frozen=True)
class TasksInconsistent:
    """A commit found task configs missing: the leader should regenerate them."""

    connector: str


@dataclass(frozen=True)
class TargetStateChanged:
    connector: str
    state: str


@dataclass(frozen=True)
class RestartRequested:
    connector: str
    include_tasks: bool
    only_failed: bool


@dataclass(frozen=True)
class TaskCountRecorded:
    connector: str
    task_count: int


@dataclass(frozen=True)
class SessionKey:
    key: bytes
    algorithm: str
    creation_timestamp_ms: int


@dataclass(frozen=True)
class SessionKeyUpdated:
    session_key: SessionKey


Event = (ConnectorConfigUpdated | ConnectorRemoved | TasksCommitted | TasksInconsistent
         | TargetStateChanged | RestartRequested | TaskCountRecorded | SessionKeyUpdated)


# -- snapshot -----------------------------------------------------------------

def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class ConfigSnapshot:
    """The config topic's meaning up to ``offset`` (read-only mappings).

    ``target_states``, ``task_configs`` and ``inconsistent`` cover only
    connectors in ``connectors``. Tasks committed before their connector's
    config record are kept and count once it arrives (compaction can leave
    a connector's config after its tasks); a connector's tombstone drops its
    tasks. ``task_configs[c]`` is empty while ``c`` is inconsistent.
    """

    offset: int
    connectors: Mapping[str, Mapping[str, str]]
    target_states: Mapping[str, str]
    task_configs: Mapping[str, tuple[Mapping[str, str], ...]]
    inconsistent: frozenset[str]
    task_count_records: Mapping[str, int]
    session_key: SessionKey | None = field(default=None)

    def task_count(self, connector: str) -> int:
        """How many committed tasks ``connector`` has (0 if none or inconsistent)."""
        return len(self.task_configs.get(connector, ()))

    def target_state(self, connector: str) -> str:
        """The connector's target state; STARTED when none was written."""
        return self.target_states.get(connector, STARTED)

    def assignable(self) -> dict[str, int]:
        """Connector -> committed task count: the work the leader's assignor hands out.

        Every configured connector is work (a STOPPED one too, with no
        tasks); an inconsistent connector counts no tasks until they are
        rewritten.
        """
        return {name: self.task_count(name) for name in sorted(self.connectors)}


# -- the state machine ----------------------------------------------------------

class _Malformed:
    """What a record handler returns for a value it cannot use (logged by apply)."""


_MALFORMED = _Malformed()

def _properties(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    props = value.get("properties")
    if not isinstance(props, dict):
        return None
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in props.items()
            if v is not None}


def _nonneg_int(value: Any, name: str) -> int | None:
    if not isinstance(value, dict):
        return None
    n = value.get(name)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        return None
    return n


def _split_task_key(rest: str) -> tuple[str, int] | None:
    """``<c>-<n>`` -> (c, n); connector names may contain dashes."""
    name, sep, number = rest.rpartition("-")
    if not sep or not name or not number.isdigit():
        return None
    return name, int(number)


class ConfigState:
    """Applies config-topic records in offset order; see the module docstring."""

    def __init__(self) -> None:
        self._offset = -1
        self._connectors: dict[str, dict[str, str]] = {}
        self._target_states: dict[str, str] = {}
        self._tasks: dict[str, dict[int, dict[str, str]]] = {}
        self._task_counts: dict[str, int] = {}
        self._pending: dict[str, dict[int, dict[str, str]]] = {}
        self._inconsistent: set[str] = set()
        self._fencing: dict[str, int] = {}
        self._session_key: SessionKey | None = None

    def apply(self, offset: int, key: str, value: bytes | None) -> Event | None:
        """Apply one record; returns what it changed, or None (nothing, or malformed)."""
        self._offset = max(self._offset, offset + 1)
        parsed: Any = None
        if value is not None:
            try:
                parsed = json.loads(value)
            except (ValueError, UnicodeDecodeError) as exc:
                log.error("config topic offset %d key %r: value is not JSON (%s); skipped",
                          offset, key, exc)
                return None
        event = self._dispatch(key, value is None, parsed)
        if isinstance(event, _Malformed):
            log.error("config topic offset %d key %r: unexpected value %.200r; skipped",
                      offset, key, parsed)
            return None
        return event

    def _dispatch(self, key: str, tombstone: bool, value: Any) -> Event | _Malformed | None:
        if key == SESSION_KEY:
            return None if tombstone else self._session(value)
        if key.startswith(TARGET_STATE_PREFIX):
            return self._target_state(key[len(TARGET_STATE_PREFIX):], tombstone, value)
        if key.startswith(RESTART_PREFIX):
            return None if tombstone else self._restart(key[len(RESTART_PREFIX):], value)
        if key.startswith(TASK_COUNT_PREFIX):
            return self._task_count(key[len(TASK_COUNT_PREFIX):], tombstone, value)
        if key.startswith(CONNECTOR_PREFIX):
            return self._connector(key[len(CONNECTOR_PREFIX):], tombstone, value)
        if key.startswith(TASK_PREFIX):
            return None if tombstone else self._task(key[len(TASK_PREFIX):], value)
        if key.startswith(COMMIT_PREFIX):
            return None if tombstone else self._commit(key[len(COMMIT_PREFIX):], value)
        log.debug("config topic: ignoring record with key %r", key)
        return None

    def _connector(self, name: str, tombstone: bool, value: Any) -> Event | _Malformed:
        if tombstone:
            self._connectors.pop(name, None)
            self._target_states.pop(name, None)
            self._tasks.pop(name, None)
            self._task_counts.pop(name, None)
            self._pending.pop(name, None)
            self._inconsistent.discard(name)
            return ConnectorRemoved(name)
        props = _properties(value)
        if props is None:
            return _MALFORMED
        self._connectors[name] = props
        return ConnectorConfigUpdated(name)

    def _task(self, rest: str, value: Any) -> Event | _Malformed | None:
        parts = _split_task_key(rest)
        props = _properties(value)
        if parts is None or props is None:
            return _MALFORMED
        name, number = parts
        self._pending.setdefault(name, {})[number] = props
        return None

    def _commit(self, name: str, value: Any) -> Event | _Malformed:
        count = _nonneg_int(value, "tasks")
        if count is None:
            return _MALFORMED
        pending = self._pending.pop(name, {})
        if any(i not in pending for i in range(count)):
            log.error("config topic: commit of %d tasks for %r without all their configs "
                      "(compaction); the connector is inconsistent until its tasks are rewritten",
                      count, name)
            self._inconsistent.add(name)
            self._task_counts[name] = count
            return TasksInconsistent(name)
        self._tasks.setdefault(name, {}).update(pending)
        self._task_counts[name] = count
        self._inconsistent.discard(name)
        return TasksCommitted(name, count)

    def _target_state(self, name: str, tombstone: bool, value: Any) -> Event | _Malformed | None:
        if tombstone:
            self._target_states.pop(name, None)
            return None
        if not isinstance(value, dict):
            return _MALFORMED
        state = value.get("state.v2")
        if state not in TARGET_STATES:
            state = value.get("state")
        if state not in TARGET_STATES:
            return _MALFORMED
        self._target_states[name] = str(state)
        return TargetStateChanged(name, str(state))

    def _restart(self, name: str, value: Any) -> Event | _Malformed:
        if not isinstance(value, dict):
            return _MALFORMED
        include_tasks = value.get("include-tasks", False)
        only_failed = value.get("only-failed", False)
        if not isinstance(include_tasks, bool) or not isinstance(only_failed, bool):
            return _MALFORMED
        return RestartRequested(name, include_tasks, only_failed)

    def _task_count(self, name: str, tombstone: bool, value: Any) -> Event | _Malformed | None:
        if tombstone:
            self._fencing.pop(name, None)
            return None
        count = _nonneg_int(value, "task-count")
        if count is None:
            return _MALFORMED
        self._fencing[name] = count
        return TaskCountRecorded(name, count)

    def _session(self, value: Any) -> Event | _Malformed:
        if not isinstance(value, dict):
            return _MALFORMED
        key, algorithm, created = (value.get("key"), value.get("algorithm"),
                                   value.get("creation-timestamp"))
        if not isinstance(key, str) or not isinstance(algorithm, str) \
                or isinstance(created, bool) or not isinstance(created, int):
            return _MALFORMED
        try:
            raw = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            return _MALFORMED
        self._session_key = SessionKey(raw, algorithm, created)
        return SessionKeyUpdated(self._session_key)

    def snapshot(self) -> ConfigSnapshot:
        """An immutable view of everything applied so far."""
        task_configs: dict[str, tuple[Mapping[str, str], ...]] = {}
        for name in self._connectors:
            count = self._task_counts.get(name, 0)
            have = self._tasks.get(name, {})
            if name in self._inconsistent or any(i not in have for i in range(count)):
                task_configs[name] = ()
            else:
                task_configs[name] = tuple(_frozen(have[i]) for i in range(count))
        return ConfigSnapshot(
            offset=self._offset,
            connectors=_frozen({n: _frozen(c) for n, c in self._connectors.items()}),
            target_states=_frozen({n: self._target_states.get(n, STARTED)
                                   for n in self._connectors}),
            task_configs=_frozen(task_configs),
            inconsistent=frozenset(self._inconsistent & set(self._connectors)),
            task_count_records=_frozen(self._fencing),
            session_key=self._session_key,
        )


# -- encoders: the records the herder writes -----------------------------------

def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def connector_record(name: str, config: Mapping[str, str]) -> tuple[str, bytes]:
    return CONNECTOR_PREFIX + name, _json({"properties": dict(config)})


def task_records(name: str, configs: list[Mapping[str, str]] | tuple[Mapping[str, str], ...],
                 ) -> list[tuple[str, bytes]]:
    """One ``task-<c>-<n>`` record per config, then the ``commit-<c>`` record."""
    records = [(f"{TASK_PREFIX}{name}-{i}", _json({"properties": dict(c)}))
               for i, c in enumerate(configs)]
    records.append((COMMIT_PREFIX + name, _json({"tasks": len(configs)})))
    return records


def target_state_record(name: str, state: str) -> tuple[str, bytes]:
    """STOPPED is written as ``state: PAUSED`` so pre-KIP-875 workers pause it."""
    if state not in TARGET_STATES:
        raise ValueError(f"target state must be one of {', '.join(TARGET_STATES)}, got {state!r}")
    old = PAUSED if state == STOPPED else state
    return TARGET_STATE_PREFIX + name, _json({"state": old, "state.v2": state})


def restart_record(name: str, include_tasks: bool, only_failed: bool) -> tuple[str, bytes]:
    return RESTART_PREFIX + name, _json({"include-tasks": include_tasks,
                                         "only-failed": only_failed})


def task_count_record(name: str, n: int) -> tuple[str, bytes]:
    return TASK_COUNT_PREFIX + name, _json({"task-count": n})


def session_key_record(key: SessionKey) -> tuple[str, bytes]:
    return SESSION_KEY, _json({"key": base64.b64encode(key.key).decode("ascii"),
                               "algorithm": key.algorithm,
                               "creation-timestamp": key.creation_timestamp_ms})


def deleted(name: str) -> list[tuple[str, None]]:
    """The tombstones that delete a connector: its config and its target state."""
    return [(CONNECTOR_PREFIX + name, None), (TARGET_STATE_PREFIX + name, None)]

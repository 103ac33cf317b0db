"""The standalone herder: the worker's connectors, their tasks and statuses.

Every method is synchronous and holds one lock (the REST API calls them from
a thread pool); they raise :class:`RestError` with Kafka Connect's status code
and message. A connector has a target state (STARTED, PAUSED, STOPPED) and a
state (UNASSIGNED, RUNNING, PAUSED, FAILED, STOPPED; RESTARTING only in a
restart's answer). STOPPED shuts the tasks down and empties their configs;
source offsets may be altered or reset only then (KIP-875).
"""

from __future__ import annotations

import contextlib
import json
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.connect.api import (
    Connector,
    ConnectorContext,
    SinkConnector,
)
from odradek.connect.runtime import eos
from odradek.connect.runtime import tasks as t
from odradek.connect.runtime.config import WorkerConfig
from odradek.connect.runtime.eos import ExactlyOnceSourceRunner
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.sink import SinkRunner
from odradek.connect.runtime.validation import RestError, config_errors, connector_class

STARTED, PAUSED_TARGET, STOPPED_TARGET = "STARTED", "PAUSED", "STOPPED"
INITIAL_STATES = {"RUNNING": STARTED, "PAUSED": PAUSED_TARGET, "STOPPED": STOPPED_TARGET}


def patched(config: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``config`` with PATCH ``changes`` applied (a null value removes the key)."""
    out = dict(config)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


class FrozenDict(dict[str, Any]):
    """A source partition as a hashable mapping (the key of ``alter_offsets``)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True))


class _Context(ConnectorContext):
    def __init__(self, herder: Herder, name: str) -> None:
        self.herder = herder
        self.name = name

    def request_task_reconfiguration(self) -> None:
        threading.Thread(target=self.herder.reconfigure, args=(self.name,), daemon=True).start()

    def raise_error(self, error: Exception) -> None:
        self.herder.fail_connector(self.name, error)


@dataclass
class Entry:
    name: str
    config: dict[str, str]
    cls: type[Connector]
    target: str
    state: str = t.UNASSIGNED
    trace: str | None = None
    instance: Connector | None = None
    task_configs: list[dict[str, str]] = field(default_factory=list)
    runners: list[t.TaskRunner] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)

    @property
    def type(self) -> str:
        return "sink" if issubclass(self.cls, SinkConnector) else "source"


class Herder:
    def __init__(self, worker: WorkerConfig, offsets: OffsetStore) -> None:
        self.worker = worker
        self.offsets = offsets
        self.worker_id = f"{worker.host}:{worker.port}"
        self.entries: dict[str, Entry] = {}
        self.lock = threading.RLock()

    # -- connectors -----------------------------------------------------------

    def tasks_shutting_down(self, name: str) -> bool:
        """Whether a task of ``name`` may still commit offsets: never here, where
        stopping a connector stops its tasks before it answers."""
        return False

    def _get(self, name: str) -> Entry:
        entry = self.entries.get(name)
        if entry is None:
            raise RestError(404, f"Connector {name} not found")
        return entry

    def _checked(self, name: str, config: Mapping[str, str]) -> type[Connector]:
        if config.get("name", name) != name:
            raise RestError(400, "Connector name configuration (" + config["name"]
                            + ") doesn't match connector name in the URL (" + name + ")")
        if not name.strip():
            raise RestError(400, "name: Connector name must not be empty")
        cls = connector_class(config)
        errors = config_errors(cls, {**config, "name": name}, self.worker.props)
        if errors:
            count = sum(len(v) for v in errors.values())
            lines = "\n".join(f"{k}: {m}" if not m.startswith(k) else m
                              for k, ms in errors.items() for m in ms)
            raise RestError(400, f"Connector configuration is invalid and contains the "
                                 f"following {count} error(s):\n{lines}")
        return cls

    def create(self, name: str, config: Mapping[str, str], initial_state: str = "RUNNING",
               *, replace: bool = False) -> tuple[bool, dict[str, Any]]:
        """(created, info). Raises 409 if it exists and ``replace`` is false."""
        if initial_state not in INITIAL_STATES:
            raise RestError(400, f"initial_state must be one of RUNNING, PAUSED, STOPPED, "
                                 f"not {initial_state}")
        config = {**config, "name": name}
        with self.lock:
            cls = self._checked(name, config)
            old = self.entries.get(name)
            if old is not None and not replace:
                raise RestError(409, f"Connector {name} already exists")
            target = INITIAL_STATES[initial_state]
            if old is not None:
                target = old.target
                self._shutdown(old)
            entry = Entry(name, config, cls, target, topics=old.topics if old else set())
            self.entries[name] = entry
            self._start(entry)
            return old is None, self.info(name)

    def patch(self, name: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
        with self.lock:
            return self.create(name, patched(self._get(name).config, changes),
                               replace=True)[1]

    def delete(self, name: str) -> None:
        with self.lock:
            self._shutdown(self._get(name))
            del self.entries[name]

    def shutdown(self) -> None:
        with self.lock:
            for entry in self.entries.values():
                self._shutdown(entry)

    def _start(self, entry: Entry) -> None:
        """Start the connector and its tasks as its target state says."""
        if entry.target == STOPPED_TARGET:
            entry.state = t.STOPPED
            return
        try:
            instance = entry.cls()
            instance.initialize(_Context(self, entry.name))
            instance.start(entry.config)
            entry.instance = instance
            max_tasks = int(entry.config.get("tasks.max", "1"))
            entry.task_configs = [dict(c) for c in instance.task_configs(max_tasks)]
            entry.trace = None
            entry.state = t.RUNNING if entry.target == STARTED else t.PAUSED
        except Exception:
            entry.state, entry.trace = t.FAILED, traceback.format_exc()
            entry.instance = None
            return
        entry.runners = [self._runner(entry, i) for i in range(len(entry.task_configs))]
        for r in entry.runners:
            r.start()

    def _runner(self, entry: Entry, n: int) -> t.TaskRunner:
        assert entry.instance is not None
        cls: type[t.TaskRunner] = (SinkRunner if entry.type == "sink" else
                                   ExactlyOnceSourceRunner if eos.enabled(self.worker)
                                   else t.SourceRunner)
        runner = cls(entry.name, n, entry.instance.task_class(), entry.task_configs[n],
                     entry.config, self.worker, entry.topics.add,
                     paused=entry.target == PAUSED_TARGET)
        if isinstance(runner, t.SourceRunner):
            runner.offsets = self.offsets
        return runner

    def _shutdown(self, entry: Entry, *, keep_configs: bool = False) -> None:
        for r in entry.runners:
            r.stop(join=False)
        for r in entry.runners:
            r.stop(join=True)
        entry.runners = []
        if not keep_configs:
            entry.task_configs = []
        if entry.instance is not None:
            with contextlib.suppress(Exception):  # best effort
                entry.instance.stop()
            entry.instance = None

    def reconfigure(self, name: str) -> None:
        with self.lock:
            entry = self.entries.get(name)
            if entry is not None and entry.target != STOPPED_TARGET:
                self._shutdown(entry)
                self._start(entry)

    def fail_connector(self, name: str, error: Exception) -> None:
        with self.lock:
            entry = self.entries.get(name)
            if entry is not None:
                entry.state = t.FAILED
                entry.trace = "".join(traceback.format_exception(error))

    # -- target states and restarts -----------------------------------------

    def pause(self, name: str) -> None:
        with self.lock:
            entry = self._get(name)
            if entry.target == STOPPED_TARGET:
                entry.target = PAUSED_TARGET
                self._start(entry)
                return
            entry.target = PAUSED_TARGET
            if entry.state == t.RUNNING:
                entry.state = t.PAUSED
            for r in entry.runners:
                r.pause()

    def resume(self, name: str) -> None:
        with self.lock:
            entry = self._get(name)
            previous, entry.target = entry.target, STARTED
            if previous == STOPPED_TARGET:
                self._start(entry)
                return
            if entry.state == t.PAUSED:
                entry.state = t.RUNNING
            for r in entry.runners:
                r.resume()

    def stop(self, name: str) -> None:
        with self.lock:
            entry = self._get(name)
            entry.target = STOPPED_TARGET
            self._shutdown(entry)
            entry.state, entry.trace = t.STOPPED, None

    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False
                ) -> dict[str, Any] | None:
        """Restart the connector (and its tasks with ``include_tasks``; only the
        FAILED ones with ``only_failed``). None: the plain restart (204);
        otherwise the status with what is restarted shown RESTARTING (202)."""
        with self.lock:
            entry = self._get(name)
            plain = not include_tasks and not only_failed
            restart_connector = not only_failed or entry.state == t.FAILED
            task_ids = [r.id for r in entry.runners
                        if include_tasks and (not only_failed or r.state == t.FAILED)]
            answer = None
            if not plain:
                answer = self.status(name)
                if restart_connector:
                    answer["connector"]["state"] = t.RESTARTING
                for task in answer["tasks"]:
                    if task["id"] in task_ids:
                        task["state"] = t.RESTARTING
            if entry.target == STOPPED_TARGET:
                return answer
            if restart_connector and (plain or (include_tasks and not only_failed)
                                      or len(task_ids) == len(entry.runners)):
                self._shutdown(entry)
                self._start(entry)
                return answer
            if restart_connector:
                self._restart_connector_only(entry)
            for n in task_ids:
                self._restart_task(entry, n)
            return answer

    def _restart_connector_only(self, entry: Entry) -> None:
        if entry.instance is not None:
            with contextlib.suppress(Exception):  # best effort
                entry.instance.stop()
        runners, entry.runners = entry.runners, []
        self._start_connector_keep_tasks(entry, runners)

    def _start_connector_keep_tasks(self, entry: Entry, runners: list[t.TaskRunner]) -> None:
        try:
            instance = entry.cls()
            instance.initialize(_Context(self, entry.name))
            instance.start(entry.config)
            entry.instance = instance
            entry.state = t.RUNNING if entry.target == STARTED else t.PAUSED
            entry.trace = None
        except Exception:
            entry.state, entry.trace = t.FAILED, traceback.format_exc()
        if runners:
            entry.runners = runners
        elif entry.instance is not None:
            max_tasks = int(entry.config.get("tasks.max", "1"))
            entry.task_configs = [dict(c) for c in entry.instance.task_configs(max_tasks)]
            entry.runners = [self._runner(entry, i) for i in range(len(entry.task_configs))]
            for r in entry.runners:
                r.start()

    def _restart_task(self, entry: Entry, n: int) -> None:
        if n >= len(entry.runners) or entry.instance is None:
            return
        entry.runners[n].stop()
        entry.runners[n] = self._runner(entry, n)
        entry.runners[n].start()

    def restart_task(self, name: str, n: int) -> None:
        with self.lock:
            entry = self._get(name)
            if not 0 <= n < len(entry.runners):
                raise RestError(404, f"Task {name}-{n} not found")
            self._restart_task(entry, n)

    # -- views --------------------------------------------------------------

    def names(self) -> list[str]:
        with self.lock:
            return sorted(self.entries)

    def info(self, name: str) -> dict[str, Any]:
        with self.lock:
            e = self._get(name)
            return {"name": name, "config": dict(e.config),
                    "tasks": [{"connector": name, "task": i}
                              for i in range(len(e.task_configs))],
                    "type": e.type}

    def config(self, name: str) -> dict[str, str]:
        with self.lock:
            return dict(self._get(name).config)

    def _state(self, state: str, trace: str | None, **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = {**extra, "state": state, "worker_id": self.worker_id}
        if trace:
            out["trace"] = trace
        return out

    def task_status(self, name: str, n: int) -> dict[str, Any]:
        with self.lock:
            e = self._get(name)
            if not 0 <= n < len(e.runners):
                raise RestError(404, f"No status found for task {name}-{n}")
            r = e.runners[n]
            return self._state(r.state, r.trace, id=n)

    def status(self, name: str) -> dict[str, Any]:
        with self.lock:
            e = self._get(name)
            return {"name": name, "connector": self._state(e.state, e.trace),
                    "tasks": [self._state(r.state, r.trace, id=r.id) for r in e.runners],
                    "type": e.type}

    def task_list(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            e = self._get(name)
            return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                    for i, c in enumerate(e.task_configs)]

    def topics(self, name: str) -> dict[str, Any]:
        with self.lock:
            return {name: {"topics": sorted(self._get(name).topics)}}

    def reset_topics(self, name: str) -> None:
        with self.lock:
            self._get(name).topics.clear()

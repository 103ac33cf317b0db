"""The connectors and tasks one distributed worker runs: exactly its assignment.

:meth:`LocalWork.apply` takes a SyncGroup assignment: revoked work is stopped
first (tasks flush their source offsets to the offsets topic), then the new
work is started from the latest config snapshot (source offsets are read to
the topic's end first, so a task moved from a dead worker resumes where that
worker's last flushed offset says). :meth:`LocalWork.on_events` reacts to
config-topic events between rebalances (connector config changed: restart
the connector, which regenerates task configs; task configs committed:
restart the tasks whose config changed; target state: pause/resume/stop;
restart requests). A connector instance's task configs are handed to
``publish`` when they differ from the committed ones (the herder writes them,
or sends them to the leader). :meth:`LocalWork.statuses` lists the state of
everything run here, for the status topic.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.connect.api import Connector, ConnectorContext, SinkConnector
from odradek.connect.distributed import configstate as cs
from odradek.connect.distributed.protocol import Assignment, ConnectorTaskId
from odradek.connect.runtime import eos
from odradek.connect.runtime import tasks as t
from odradek.connect.runtime.config import WorkerConfig
from odradek.connect.runtime.eos import ExactlyOnceSourceRunner
from odradek.connect.runtime.offset_topic import TopicOffsets
from odradek.connect.runtime.sink import SinkRunner
from odradek.connect.runtime.validation import connector_class

log = logging.getLogger(__name__)

Publish = Callable[[str, list[dict[str, str]]], None]
"""Hand a connector's fresh task configs to the leader (may raise)."""


class _Context(ConnectorContext):
    def __init__(self, work: LocalWork, name: str) -> None:
        self.work, self.name = work, name

    def request_task_reconfiguration(self) -> None:
        threading.Thread(target=self.work.reconfigure, args=(self.name,), daemon=True).start()

    def raise_error(self, error: Exception) -> None:
        with self.work.lock:
            c = self.work.connectors.get(self.name)
            if c is not None:
                c.state, c.trace = t.FAILED, "".join(traceback.format_exception(error))


@dataclass
class _Conn:
    state: str = t.UNASSIGNED
    trace: str | None = None
    instance: Connector | None = None


@dataclass
class LocalWork:
    worker: WorkerConfig
    offsets: TopicOffsets
    snapshot: Callable[[], cs.ConfigSnapshot]
    publish: Publish
    on_topic: Callable[[str, int, str], None]
    lock: threading.RLock = field(default_factory=threading.RLock)
    connectors: dict[str, _Conn] = field(default_factory=dict)
    runners: dict[ConnectorTaskId, t.TaskRunner | None] = field(default_factory=dict)
    unpublished: set[str] = field(default_factory=set)

    # -- the assignment ----------------------------------------------------------

    def allocation(self) -> tuple[tuple[str, ...], tuple[ConnectorTaskId, ...]]:
        with self.lock:
            return tuple(sorted(self.connectors)), tuple(sorted(self.runners))

    def apply(self, a: Assignment, eager: bool) -> None:
        with self.lock:
            revoked_c, revoked_t = set(a.revoked_connectors), set(a.revoked_tasks)
            if eager:
                revoked_c = set(self.connectors) - set(a.connectors)
                revoked_t = set(self.runners) - set(a.tasks)
            self._stop_tasks([r for r in revoked_t if r in self.runners])
            for c in revoked_c:
                self._stop_connector(c)
                self.connectors.pop(c, None)
            snap = self.snapshot()
            if any(tid not in self.runners for tid in a.tasks):
                self.offsets.refresh()
            for c in a.connectors:
                if c not in self.connectors:
                    self.connectors[c] = _Conn()
                    self._start_connector(c, snap)
            for tid in a.tasks:
                if tid not in self.runners:
                    self.runners[tid] = self._start_task(tid, snap)

    def shutdown(self) -> None:
        with self.lock:
            self._stop_tasks(list(self.runners))
            for c in list(self.connectors):
                self._stop_connector(c)
            self.connectors.clear()

    # -- connectors ----------------------------------------------------------------

    def _start_connector(self, name: str, snap: cs.ConfigSnapshot) -> None:
        conn = self.connectors[name]
        config = snap.connectors.get(name)
        if config is None:
            return
        target = snap.target_state(name)
        if target == cs.STOPPED:
            conn.state, conn.trace = t.STOPPED, None
            return
        try:
            instance = connector_class(config)()
            instance.initialize(_Context(self, name))
            instance.start(dict(config))
            conn.instance, conn.trace = instance, None
            conn.state = t.RUNNING if target == cs.STARTED else t.PAUSED
        except Exception:
            conn.state, conn.trace, conn.instance = t.FAILED, traceback.format_exc(), None
            return
        self.unpublished.add(name)
        self._publish(name, snap)

    def _stop_connector(self, name: str) -> None:
        conn = self.connectors.get(name)
        if conn is not None and conn.instance is not None:
            with contextlib.suppress(Exception):  # best effort
                conn.instance.stop()
            conn.instance = None

    def _publish(self, name: str, snap: cs.ConfigSnapshot) -> None:
        """Send the connector's task configs if they differ from the committed ones."""
        conn = self.connectors.get(name)
        if conn is None or conn.instance is None or name not in snap.connectors:
            self.unpublished.discard(name)
            return
        try:
            max_tasks = int(snap.connectors[name].get("tasks.max", "1"))
            configs = [dict(c) for c in conn.instance.task_configs(max_tasks)]
        except Exception:
            conn.state, conn.trace = t.FAILED, traceback.format_exc()
            self.unpublished.discard(name)
            return
        committed = [dict(c) for c in snap.task_configs.get(name, ())]
        if configs == committed and name not in snap.inconsistent:
            self.unpublished.discard(name)
            return
        try:
            self.publish(name, configs)
            self.unpublished.discard(name)
        except Exception as e:  # retried on the next tick
            log.warning("task configs of %s not written yet: %s", name, e)

    def retry_publish(self) -> None:
        with self.lock:
            if self.unpublished:
                snap = self.snapshot()
                for name in list(self.unpublished):
                    self._publish(name, snap)

    def reconfigure(self, name: str) -> None:
        with self.lock:
            if name in self.connectors:
                self._publish(name, self.snapshot())

    def _restart_connector(self, name: str, snap: cs.ConfigSnapshot) -> None:
        self._stop_connector(name)
        self._start_connector(name, snap)

    # -- tasks ---------------------------------------------------------------------

    def _start_task(self, tid: ConnectorTaskId, snap: cs.ConfigSnapshot) -> t.TaskRunner | None:
        """The task's runner, started; None while its config is not committed."""
        configs = snap.task_configs.get(tid.connector, ())
        config = snap.connectors.get(tid.connector)
        if config is None or tid.task >= len(configs):
            return None
        try:
            cls = connector_class(config)
            task_cls = cls().task_class()
        except Exception:
            log.exception("cannot start task %s-%d", tid.connector, tid.task)
            return None
        kind: type[t.TaskRunner] = (
            SinkRunner if issubclass(cls, SinkConnector)
            else ExactlyOnceSourceRunner if eos.enabled(self.worker) else t.SourceRunner)
        runner = kind(tid.connector, tid.task, task_cls, configs[tid.task], config, self.worker,
                      lambda topic: self.on_topic(tid.connector, tid.task, topic),
                      paused=snap.target_state(tid.connector) == cs.PAUSED)
        if isinstance(runner, t.SourceRunner):
            runner.offsets = self.offsets
        runner.start()
        return runner

    def _stop_tasks(self, ids: list[ConnectorTaskId]) -> None:
        runners = [r for r in (self.runners.pop(i, None) for i in ids) if r is not None]
        for r in runners:
            r.stop(join=False)
        for r in runners:
            r.stop(join=True)

    def _restart_task(self, tid: ConnectorTaskId, snap: cs.ConfigSnapshot) -> None:
        self._stop_tasks([tid])
        self.runners[tid] = self._start_task(tid, snap)

    def restart_task(self, tid: ConnectorTaskId) -> bool:
        """Restart a task run here; False if it is not."""
        with self.lock:
            if tid not in self.runners:
                return False
            self._restart_task(tid, self.snapshot())
            return True

    # -- config events between rebalances ------------------------------------------

    def on_events(self, events: list[Any]) -> None:
        with self.lock:
            snap = self.snapshot()
            for e in events:
                self._on_event(e, snap)

    def _tasks_of(self, name: str) -> list[ConnectorTaskId]:
        return sorted(tid for tid in self.runners if tid.connector == name)

    def _on_event(self, e: Any, snap: cs.ConfigSnapshot) -> None:
        name = getattr(e, "connector", None)
        if isinstance(e, cs.ConnectorConfigUpdated) and name in self.connectors:
            if self.connectors[e.connector].instance is not None or \
                    self.connectors[e.connector].state == t.FAILED:
                self._restart_connector(e.connector, snap)
        elif isinstance(e, cs.ConnectorRemoved):
            self._stop_tasks(self._tasks_of(e.connector))
            if e.connector in self.connectors:
                self._stop_connector(e.connector)
                del self.connectors[e.connector]
        elif isinstance(e, cs.TasksCommitted):
            configs = snap.task_configs.get(e.connector, ())
            for tid in self._tasks_of(e.connector):
                runner = self.runners[tid]
                if tid.task < len(configs) and (runner is None
                                                or runner.config != dict(configs[tid.task])):
                    self._restart_task(tid, snap)
        elif isinstance(e, cs.TasksInconsistent) and name in self.connectors:
            self.unpublished.add(e.connector)
            self._publish(e.connector, snap)
        elif isinstance(e, cs.TargetStateChanged):
            self._target(e.connector, e.state, snap)
        elif isinstance(e, cs.RestartRequested):
            self._restart(e, snap)

    def _target(self, name: str, state: str, snap: cs.ConfigSnapshot) -> None:
        conn = self.connectors.get(name)
        if conn is not None:
            if state == cs.STOPPED:
                self._stop_connector(name)
                conn.state, conn.trace = t.STOPPED, None
            elif conn.instance is None and conn.state != t.FAILED:
                self._start_connector(name, snap)
            elif conn.state in (t.RUNNING, t.PAUSED):
                conn.state = t.RUNNING if state == cs.STARTED else t.PAUSED
        for tid in self._tasks_of(name):
            runner = self.runners[tid]
            if runner is not None:
                runner.resume() if state == cs.STARTED else runner.pause()

    def _restart(self, e: cs.RestartRequested, snap: cs.ConfigSnapshot) -> None:
        conn = self.connectors.get(e.connector)
        if conn is not None and (not e.only_failed or conn.state == t.FAILED):
            self._restart_connector(e.connector, snap)
        if e.include_tasks:
            for tid in self._tasks_of(e.connector):
                runner = self.runners[tid]
                if not e.only_failed or runner is None or runner.state == t.FAILED:
                    self._restart_task(tid, snap)

    # -- statuses --------------------------------------------------------------------

    def statuses(self) -> list[tuple[str, int | None, str, str | None]]:
        """(connector, task or None, state, trace) of everything run here."""
        with self.lock:
            out: list[tuple[str, int | None, str, str | None]] = [
                (c, None, conn.state, conn.trace) for c, conn in self.connectors.items()]
            for tid, r in self.runners.items():
                if r is not None:
                    out.append((tid.connector, tid.task, r.state, r.trace))
            return out

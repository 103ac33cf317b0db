"""The distributed herder: the REST API's view of the whole Connect cluster.

Reads answer from this worker's copy of the config topic (connectors, task
configs, target states) and status topic (every worker's statuses), so any
worker answers for every connector. Writes go to the config topic and only
the group leader writes: on another worker a write raises :class:`NotLeader`
with the leader's URL (the REST layer forwards the request there and answers
with the leader's answer); while a rebalance is under way (no leader known)
it is 409 "Request cannot be completed because a rebalance is expected".
Restarting one task goes to the worker running it (its status's
``worker_id``). The work this worker runs is :class:`LocalWork`'s; task
configs its connectors generate are written here if this worker leads, else
POSTed to the leader's internal ``/connectors/{c}/tasks`` endpoint.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

from odradek.connect.distributed import configstate as cs
from odradek.connect.distributed.protocol import ConnectorTaskId
from odradek.connect.distributed.statusrecords import Status, TopicStatus
from odradek.connect.runtime import tasks as t
from odradek.connect.runtime.dconfig import DistributedConfig
from odradek.connect.runtime.dstate import ClusterState
from odradek.connect.runtime.dwork import LocalWork
from odradek.connect.runtime.herder import INITIAL_STATES, Entry, Herder, patched
from odradek.connect.runtime.offset_topic import TopicOffsets
from odradek.connect.runtime.validation import RestError, connector_class

REBALANCING = "Request cannot be completed because a rebalance is expected"
FORWARD_TIMEOUT_S = 30.0


class NotLeader(Exception):
    """This worker cannot do it; ``url`` (the leader's, or a task's worker's) can."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class DistributedHerder(Herder):
    def __init__(self, config: DistributedConfig, cluster: ClusterState,
                 offsets: TopicOffsets) -> None:
        super().__init__(config.worker, offsets)
        self.dconfig = config
        self.cluster = cluster
        self.topic_offsets = offsets
        self.generation = -1
        self.leader = False
        self.leader_url: str | None = None
        self._published: dict[tuple[str, int | None], tuple[str, str | None, int]] = {}
        self._topics_seen: set[tuple[str, str]] = set()
        self._status_lock = threading.Lock()
        self.work = LocalWork(config.worker, offsets, cluster.snapshot, self._publish_tasks,
                              self._on_topic)

    # -- rebalances ---------------------------------------------------------------

    def rebalancing(self) -> None:
        self.leader_url = None

    def joined(self, generation: int, leader: bool, leader_url: str) -> None:
        self.generation, self.leader, self.leader_url = generation, leader, leader_url

    def configured(self) -> dict[str, int]:
        return self.cluster.snapshot().assignable()

    def tick(self) -> None:
        """Between rebalances: act on config events, retry task configs, write statuses."""
        events = self.cluster.events()
        if events:
            self.work.on_events(events)
        self.work.retry_publish()
        self.publish_statuses()

    def publish_statuses(self) -> None:
        """Write the statuses of what runs here that changed since last written;
        work that stopped running here gets UNASSIGNED (a safe write) and is
        forgotten (run here again, its status is written again)."""
        with self._status_lock:
            self._publish_statuses()

    def _publish_statuses(self) -> None:
        current = self.work.statuses()
        running = {(c, n) for c, n, _, _ in current}
        gone = [k for k in self._published if k not in running]
        for c, n in gone:
            del self._published[(c, n)]
            self.cluster.put_safe(c, n, Status(t.UNASSIGNED, None, self.worker_id,
                                               self.generation))
        if gone:  # on the brokers before this worker rejoins, so before the next owner's
            self.cluster.status_log.flush()
        for c, n, state, trace in current:
            key = (c, n)
            if self._published.get(key, ("", None, -2))[:2] == (state, trace):
                continue
            self._published[key] = (state, trace, self.generation)
            self.cluster.put_status(c, n, Status(state, trace, self.worker_id, self.generation))

    def _on_topic(self, connector: str, task: int, topic: str) -> None:
        if (connector, topic) not in self._topics_seen:
            self._topics_seen.add((connector, topic))
            self.cluster.put_topic(TopicStatus(topic, connector, task, int(time.time() * 1000)))

    def shutdown(self) -> None:
        """Stop everything run here; its statuses become UNASSIGNED (safe writes)."""
        self.work.shutdown()
        self.publish_statuses()

    # -- writes: the leader's ------------------------------------------------------

    def _require_leader(self) -> None:
        if self.leader_url is None:
            raise RestError(409, REBALANCING)
        if not self.leader:
            raise NotLeader(self.leader_url)

    def _publish_tasks(self, name: str, configs: list[dict[str, str]]) -> None:
        if self.leader:
            self.cluster.write_configs(list(cs.task_records(name, tuple(configs))))
            return
        if self.leader_url is None:
            raise RestError(409, REBALANCING)
        req = urllib.request.Request(f"{self.leader_url}/connectors/{name}/tasks",
                                     data=json.dumps(configs).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=FORWARD_TIMEOUT_S):
            pass

    def put_task_configs(self, name: str, configs: Any) -> None:
        """The internal endpoint: a worker running ``name`` sends its task configs."""
        if not isinstance(configs, list) or not all(
                isinstance(c, dict) and all(isinstance(v, str) for v in c.values())
                for c in configs):
            raise RestError(400, "Task configs must be a JSON array of string maps")
        self._require_leader()
        snap = self.cluster.snapshot()
        if name not in snap.connectors:
            raise RestError(404, f"Connector {name} not found")
        committed = [dict(c) for c in snap.task_configs.get(name, ())]
        if configs != committed or name in snap.inconsistent:
            self.cluster.write_configs(list(cs.task_records(name, configs)))

    def create(self, name: str, config: Mapping[str, str], initial_state: str = "RUNNING",
               *, replace: bool = False) -> tuple[bool, dict[str, Any]]:
        if initial_state not in INITIAL_STATES:
            raise RestError(400, f"initial_state must be one of RUNNING, PAUSED, STOPPED, "
                                 f"not {initial_state}")
        self._require_leader()
        config = {**config, "name": name}
        self._checked(name, config)
        exists = name in self.cluster.snapshot().connectors
        if exists and not replace:
            raise RestError(409, f"Connector {name} already exists")
        records: list[tuple[str, bytes | None]] = []
        if not exists:
            records.append(cs.target_state_record(name, INITIAL_STATES[initial_state]))
        records.append(cs.connector_record(name, config))
        self.cluster.write_configs(records)
        return not exists, self.info(name)

    def patch(self, name: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
        self._require_leader()
        return self.create(name, patched(self.config(name), changes), replace=True)[1]

    def delete(self, name: str) -> None:
        self._require_leader()
        snap = self.cluster.snapshot()
        self._get(name)
        self.cluster.write_configs(list(cs.deleted(name)))
        self.cluster.forget_statuses(name, max(snap.task_count(name),
                                               len(self.cluster.task_statuses(name))))

    def _set_target(self, name: str, state: str) -> None:
        self._require_leader()
        self._get(name)
        records: list[tuple[str, bytes | None]] = [cs.target_state_record(name, state)]
        if state == cs.STOPPED:
            records.extend(cs.task_records(name, []))
        self.cluster.write_configs(records)

    def pause(self, name: str) -> None:
        self._set_target(name, cs.PAUSED)

    def resume(self, name: str) -> None:
        self._set_target(name, cs.STARTED)

    def stop(self, name: str) -> None:
        self._set_target(name, cs.STOPPED)

    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False
                ) -> dict[str, Any] | None:
        self._require_leader()
        answer = None
        if include_tasks or only_failed:
            answer = self.status(name)
            if not only_failed or answer["connector"]["state"] == t.FAILED:
                answer["connector"]["state"] = t.RESTARTING
            for task in answer["tasks"]:
                if include_tasks and (not only_failed or task["state"] == t.FAILED):
                    task["state"] = t.RESTARTING
        else:
            self._get(name)
        self.cluster.write_configs([cs.restart_record(name, include_tasks, only_failed)])
        return answer

    def restart_task(self, name: str, n: int) -> None:
        self._get(name)
        if not 0 <= n < self.cluster.snapshot().task_count(name):
            raise RestError(404, f"Task {name}-{n} not found")
        if self.work.restart_task(ConnectorTaskId(name, n)):
            return
        status = self.cluster.task_statuses(name).get(n)
        if status is None or not status.worker_id or status.worker_id == self.worker_id:
            raise RestError(409, REBALANCING)
        raise NotLeader(f"http://{status.worker_id}")

    # -- reads: this worker's copy of the topics ----------------------------------

    def tasks_shutting_down(self, name: str) -> bool:
        """Whether a task of ``name`` still reports RUNNING, PAUSED or RESTARTING
        in the status topic. A STOPPED connector's task configs are empty at
        once, but its tasks stop (committing their last offsets) only when
        their workers rebalance, then write UNASSIGNED: an offset alteration
        before that could be overwritten by a task's last commit."""
        live = (t.RUNNING, t.PAUSED, t.RESTARTING)
        return any(s.state in live for s in self.cluster.task_statuses(name).values())

    def _get(self, name: str) -> Entry:
        snap = self.cluster.snapshot()
        config = snap.connectors.get(name)
        if config is None:
            raise RestError(404, f"Connector {name} not found")
        cls = connector_class(config)
        return Entry(name, dict(config), cls, snap.target_state(name),
                     task_configs=[dict(c) for c in snap.task_configs.get(name, ())])

    def names(self) -> list[str]:
        return sorted(self.cluster.snapshot().connectors)

    def info(self, name: str) -> dict[str, Any]:
        e = self._get(name)
        return {"name": name, "config": e.config,
                "tasks": [{"connector": name, "task": i} for i in range(len(e.task_configs))],
                "type": e.type}

    def config(self, name: str) -> dict[str, str]:
        return self._get(name).config

    def _shown(self, s: Status | None, **extra: Any) -> dict[str, Any]:
        if s is None:
            return {**extra, "state": t.UNASSIGNED, "worker_id": ""}
        out: dict[str, Any] = {**extra, "state": s.state, "worker_id": s.worker_id}
        if s.trace:
            out["trace"] = s.trace
        return out

    def status(self, name: str) -> dict[str, Any]:
        e = self._get(name)
        tasks = self.cluster.task_statuses(name)
        return {"name": name, "connector": self._shown(self.cluster.connector_status(name)),
                "tasks": [self._shown(s, id=n) for n, s in tasks.items()
                          if n < len(e.task_configs)],
                "type": e.type}

    def task_status(self, name: str, n: int) -> dict[str, Any]:
        e = self._get(name)
        s = self.cluster.task_statuses(name).get(n)
        if s is None or n >= len(e.task_configs):
            raise RestError(404, f"No status found for task {name}-{n}")
        return self._shown(s, id=n)

    def task_list(self, name: str) -> list[dict[str, Any]]:
        return [{"id": {"connector": name, "task": i}, "config": c}
                for i, c in enumerate(self._get(name).task_configs)]

    def topics(self, name: str) -> dict[str, Any]:
        self._get(name)
        return {name: {"topics": self.cluster.topics(name)}}

    def reset_topics(self, name: str) -> None:
        self._get(name)
        self.cluster.forget_topics(name)
        self._topics_seen = {k for k in self._topics_seen if k[0] != name}

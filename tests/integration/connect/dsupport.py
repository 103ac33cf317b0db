"""Helpers of the distributed Connect tests: worker settings, a worker run as
``odradek connect distributed`` in a subprocess, REST calls retried across
rebalances, and readers of the output and internal topics (confluent-kafka)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from odradek.testing.broker import Broker
from tests.integration.connect.support import ROOT, call, env, wait_for, write_properties

SOURCE = "tests.integration.connect.dplugins.CounterSource"
TASKS = 6
DELAY_MS = 5000


def dist_props(bootstrap: str, group: str = "cluster", **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.flush.interval.ms": "300",
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500",
            "scheduled.rebalance.max.delay.ms": str(DELAY_MS),
            "listeners": "http://127.0.0.1:0", **extra}


def run_cli(props_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "connect", "distributed",
                           str(props_file)], capture_output=True, text=True, env=env(),
                          cwd=ROOT, timeout=120)


class Worker:
    """``odradek connect distributed WORKER`` as a subprocess; ``url`` once it serves."""

    def __init__(self, props_file: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "connect", "distributed", str(props_file)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(), cwd=ROOT)
        self.lines: list[str] = []
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line)
                if "Odradek Connect" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(60)
        self.url = next((line.split(" at ")[1].split()[0] for line in self.lines
                         if "Odradek Connect" in line), "")
        if not self.url:
            self.proc.kill()
            raise RuntimeError(f"worker did not start: {''.join(self.lines)}")
        self.worker_id = self.url.removeprefix("http://")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(60)


def retry(method: str, url: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204)
          ) -> Any:
    """Call until the answer is not 409 (a rebalance under way); assert it is ``ok``."""
    def attempt() -> tuple[int, Any] | None:
        status, answer = call(method, url, body)
        return None if status == 409 else (status, answer)
    status, answer = wait_for(f"{method} {url} outside a rebalance", attempt, 60)
    assert status in ok, (status, answer)
    return answer


def status(url: str, name: str = "c") -> dict[str, Any] | None:
    code, body = call("GET", f"{url}/connectors/{name}/status")
    return body if code == 200 else None


def spread(url: str, n: int = TASKS) -> dict[int, str] | None:
    """task -> worker_id once every task is RUNNING, else None."""
    s = status(url)
    if s is None or len(s["tasks"]) != n or any(t["state"] != "RUNNING" for t in s["tasks"]):
        return None
    return {t["id"]: t["worker_id"] for t in s["tasks"]}


def values(bootstrap: str, topic: str) -> list[str]:
    """Every value in ``topic`` (read to its end)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out, done = [], {p for p, e in ends.items() if e == 0}
        while len(done) < len(parts):
            msg = consumer.poll(5)
            assert msg is not None, "no record within 5 s"
            if msg.error():
                done.add(msg.partition())
                continue
            out.append((msg.value() or b"").decode())
            if (msg.offset() or 0) + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()


def records(bootstrap: str, topic: str) -> list[tuple[str, Any]]:
    """(key, JSON value or None) of every record of an internal topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        out: list[tuple[str, Any]] = []
        left = sum(ends.values())
        while left > 0:
            msg = consumer.poll(5)
            assert msg is not None and not msg.error(), msg
            left -= 1
            value = msg.value()
            key = (msg.key() or b"").decode()
            out.append((key, None if value is None else json.loads(value)))
        return out
    finally:
        consumer.close()


def sequences(vals: list[str]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for v in vals:
        task, i = v.removeprefix("task-").split(":")
        out.setdefault(int(task), []).append(int(i))
    return out


def no_gaps(seqs: dict[int, list[int]]) -> None:
    """Every task's numbers 0..max all reached the topic (duplicates allowed)."""
    for task, got in seqs.items():
        assert set(got) == set(range(max(got) + 1)), f"task {task} lost records"


def start_cluster(broker: Broker, tmp: Path, n: int = 3, **extra: str) -> list[Worker]:
    props = write_properties(tmp / "worker.properties",
                             dist_props(broker.bootstrap_servers, **extra))
    return [Worker(props) for _ in range(n)]


def create(url: str, name: str = "c", **config: str) -> None:
    retry("POST", f"{url}/connectors", {"name": name, "config": {
        "connector.class": SOURCE, "tasks.max": str(TASKS), "topic": "out", **config}},
        ok=(201,))


def shows(workers: list[Worker], what: str, check: Any) -> None:
    """Wait until ``check(url)`` holds on every worker."""
    for url in [w.url for w in workers]:
        wait_for(f"{what} on {url}", partial(check, url), 60)

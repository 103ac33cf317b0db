"""``odradek connect distributed``: worker processes over a real broker form one
Connect cluster. Two workers run a 6-task source 3/3 and a third joining makes
it 2/2/2 (tasks that stay are never restarted); a worker killed
with SIGKILL loses its tasks to the others only after
``scheduled.rebalance.max.delay.ms`` while the other tasks run on untouched, and
no record is lost; config changes through a non-leader reach every worker; the
internal topics hold Kafka's keys and values; a whole-cluster restart resumes
from the offsets; bad internal topics and settings are one line, exit 1."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from odradek.client.client import KafkaClient
from odradek.testing.broker import ADMIN_PASSWORD, Broker
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from tests.integration.connect.dsupport import (
    DELAY_MS,
    SOURCE,
    TASKS,
    Worker,
    create,
    dist_props,
    no_gaps,
    records,
    retry,
    run_cli,
    sequences,
    shows,
    spread,
    start_cluster,
    status,
    values,
)
from tests.integration.connect.support import call, wait_for, write_properties


@pytest.fixture
def broker() -> Iterator[Broker]:
    overrides: dict[str, Any] = {"group.initial.rebalance.delay.ms": "0"}
    with Broker(**overrides) as b:
        yield b


@pytest.mark.slow
def test_tasks_spread_2_2_2_and_move_after_the_delay_without_loss(
        broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path, n=2)
    try:
        create(workers[0].url)
        wait_for("6 tasks RUNNING 3/3", lambda: (
            p if (p := spread(workers[1].url)) and sorted(
                list(p.values()).count(w.worker_id) for w in workers) == [3, 3] else None),
            90)
        first = wait_for("every task to have written", lambda: (
            q if len(q := sequences(values(broker.bootstrap_servers, "out"))) == TASKS
            else None), 60)
        # a third worker joins: one task of each moves to it, the rest run on
        workers.append(Worker(tmp_path / "worker.properties"))
        placed = wait_for("6 tasks RUNNING 2/2/2", lambda: (
            p if (p := spread(workers[1].url)) and sorted(
                list(p.values()).count(w.worker_id) for w in workers) == [2, 2, 2] else None),
            90)
        unmoved = [t for t, w in placed.items() if w != workers[2].worker_id]
        assert len(unmoved) == 4
        victim = workers[2]
        survivors = {t: w for t, w in placed.items() if w != victim.worker_id}
        before = sequences(values(broker.bootstrap_servers, "out"))
        killed = time.monotonic()
        victim.kill()
        # during the delay: the survivors' tasks keep RUNNING where they were
        # and keep producing; the victim's tasks are not yet elsewhere
        wait_for("the survivors' records to flow on", lambda: all(
            max(sequences(values(broker.bootstrap_servers, "out")).get(t, [-1]))
            > max(before.get(t, [-1])) + 20 for t in survivors), 30)
        moved = wait_for("the victim's tasks RUNNING on the survivors", lambda: (
            p if (p := spread(workers[0].url)) and victim.worker_id not in p.values()
            else None), 60 + DELAY_MS / 1000)
        assert time.monotonic() - killed >= DELAY_MS / 1000, "moved before the delay"
        for t, owner in survivors.items():
            assert moved[t] == owner, f"task {t} moved from {owner} to {moved[t]}"
        assert sorted(list(moved.values()).count(w.worker_id) for w in workers[:2]) == [3, 3]
        # the moved tasks resume past their last records: nothing lost
        wait_for("every task past its pre-kill count + 50", lambda: all(
            max(sequences(values(broker.bootstrap_servers, "out")).get(t, [-1]))
            > max(before.get(t, [-1])) + 50 for t in range(TASKS)), 60)
        seqs = sequences(values(broker.bootstrap_servers, "out"))
        no_gaps(seqs)
        for t in survivors:  # never restarted: one increasing run, no repeats
            assert seqs[t] == sorted(set(seqs[t])), f"task {t} restarted"
        assert all(len(first.get(t, [])) > 0 for t in unmoved)
    finally:
        for w in workers:
            w.kill()
            print(w.worker_id, "".join(w.lines))


@pytest.mark.slow
def test_a_change_through_any_worker_reaches_every_worker(broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path)
    try:
        create(workers[0].url, **{"tasks.max": "2"})
        shows(workers, "2 tasks RUNNING", lambda u: spread(u, 2))
        # one worker leads: the changes made through the two others are forwarded
        for n, w in enumerate(workers):
            config = {"connector.class": SOURCE, "tasks.max": "2", "topic": "out",
                      "interval.ms": str(30 + n)}
            retry("PUT", f"{w.url}/connectors/c/config", config, ok=(200,))
            shows(workers, f"interval.ms={30 + n}", lambda u, n=n: call(
                "GET", f"{u}/connectors/c/config")[1].get("interval.ms") == str(30 + n))
            shows(workers, "the new task configs", lambda u, n=n: all(
                t["config"]["interval.ms"] == str(30 + n)
                for t in call("GET", f"{u}/connectors/c/tasks")[1]))
            retry("PUT", f"{w.url}/connectors/c/pause", ok=(202,))
            shows(workers, "PAUSED", lambda u: (s := status(u)) is not None
                  and s["connector"]["state"] == "PAUSED"
                  and [t["state"] for t in s["tasks"]] == ["PAUSED"] * 2)
            retry("PUT", f"{w.url}/connectors/c/resume", ok=(202,))
            shows(workers, "RUNNING", lambda u: (s := status(u)) is not None
                  and s["connector"]["state"] == "RUNNING" and spread(u, 2))
        code, body = call("GET", f"{workers[2].url}/connectors")
        assert (code, body) == (200, ["c"])
        # restarts through any worker: one task goes to the worker running it
        for w in workers:
            retry("POST", f"{w.url}/connectors/c/tasks/0/restart", ok=(204,))
            retry("POST", f"{w.url}/connectors/c/restart", ok=(204,))
            answer = retry("POST", f"{w.url}/connectors/c/restart?includeTasks=true", ok=(202,))
            assert answer["connector"]["state"] == "RESTARTING"
            assert [t["state"] for t in answer["tasks"]] == ["RESTARTING"] * 2
            shows(workers, "RUNNING after the restarts", lambda u: spread(u, 2))
        code, body = call("POST", f"{workers[0].url}/connectors/c/tasks/7/restart")
        assert code == 404, body
        # a delete through any worker: gone everywhere, and its tasks stop
        retry("DELETE", f"{workers[1].url}/connectors/c", ok=(204,))
        shows(workers, "no connector", lambda u: call("GET", f"{u}/connectors")[1] == [])
        shows(workers, "404 for c", lambda u: call("GET", f"{u}/connectors/c/status")[0] == 404)
        settled = wait_for("the output to stop growing", lambda: (
            n if (n := len(values(broker.bootstrap_servers, "out"))) == len(
                values(broker.bootstrap_servers, "out")) else None), 30)
        time.sleep(1)  # checking that nothing happens needs a span of time
        assert len(values(broker.bootstrap_servers, "out")) == settled
    finally:
        for w in workers:
            w.kill()


@pytest.mark.slow
def test_the_internal_topics_hold_kafkas_records(broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path, n=2)
    try:
        create(workers[1].url)
        wait_for("6 tasks RUNNING", lambda: spread(workers[0].url))
        wait_for("offsets of every task", lambda: len(
            call("GET", f"{workers[0].url}/connectors/c/offsets")[1]["offsets"]) == TASKS)
        configs = dict(records(broker.bootstrap_servers, "cluster-configs"))
        assert configs["connector-c"] == {"properties": {
            "connector.class": SOURCE, "tasks.max": "6", "topic": "out", "name": "c"}}
        for n in range(TASKS):
            assert configs[f"task-c-{n}"] == {"properties": {
                "topic": "out", "task.number": str(n), "interval.ms": "20"}}
        assert configs["commit-c"] == {"tasks": TASKS}
        assert configs["target-state-c"] == {"state": "STARTED", "state.v2": "STARTED"}
        statuses = dict(records(broker.bootstrap_servers, "cluster-status"))
        ids = {w.worker_id for w in workers}
        for n in range(TASKS):
            s = statuses[f"status-task-c-{n}"]
            assert s["state"] == "RUNNING" and s["worker_id"] in ids and s["trace"] is None
            assert isinstance(s["generation"], int) and s["generation"] >= 0
        assert statuses["status-connector-c"]["state"] == "RUNNING"
        offsets = records(broker.bootstrap_servers, "cluster-offsets")
        keys = {k for k, _ in offsets}
        assert keys == {f'["c",{{"task":{n}}}]' for n in range(TASKS)}
        assert all(set(v) == {"i"} for _, v in offsets)
        # KIP-875 through a worker: stop, rewind task 0, see it in the topic
        retry("PUT", f"{workers[0].url}/connectors/c/stop", ok=(204,))
        wait_for("STOPPED", lambda: (s := status(workers[1].url)) is not None
                 and s["connector"]["state"] == "STOPPED" and s["tasks"] == [])
        retry("PATCH", f"{workers[0].url}/connectors/c/offsets",
              {"offsets": [{"partition": {"task": 0}, "offset": {"i": 3}}]}, ok=(200,))
        got = call("GET", f"{workers[1].url}/connectors/c/offsets")[1]["offsets"]
        assert {"partition": {"task": 0}, "offset": {"i": 3}} in got
        assert dict(records(broker.bootstrap_servers, "cluster-offsets"))[
            '["c",{"task":0}]'] == {"i": 3}
        retry("DELETE", f"{workers[1].url}/connectors/c/offsets", ok=(200,))
        assert call("GET", f"{workers[0].url}/connectors/c/offsets")[1] == {"offsets": []}
        assert dict(records(broker.bootstrap_servers, "cluster-offsets"))[
            '["c",{"task":0}]'] is None
        retry("PUT", f"{workers[1].url}/connectors/c/resume", ok=(202,))
        wait_for("RUNNING again", lambda: spread(workers[0].url))
        code, body = call("DELETE", f"{workers[0].url}/connectors/c/offsets")
        assert code == 400 and "STOPPED" in body["message"], body
    finally:
        for w in workers:
            w.kill()


@pytest.mark.slow
def test_a_restarted_cluster_resumes_from_the_offsets(broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path)
    create(workers[0].url)
    wait_for("6 tasks RUNNING", lambda: spread(workers[0].url))
    wait_for("30 records a task", lambda: all(
        len(s) > 30 for s in sequences(values(broker.bootstrap_servers, "out")).values())
        and len(sequences(values(broker.bootstrap_servers, "out"))) == TASKS)
    for w in workers:
        assert w.stop() == 0, "".join(w.lines)
    before = sequences(values(broker.bootstrap_servers, "out"))
    workers = start_cluster(broker, tmp_path)
    try:
        wait_for("6 tasks RUNNING again", lambda: spread(workers[1].url), 90)
        wait_for("every task 30 records further", lambda: all(
            max(sequences(values(broker.bootstrap_servers, "out"))[t]) > max(before[t]) + 30
            for t in range(TASKS)), 60)
        seqs = sequences(values(broker.bootstrap_servers, "out"))
        no_gaps(seqs)
        for t, got in seqs.items():
            assert got.count(0) == 1, f"task {t} started over instead of resuming"
            assert got == sorted(set(got)), f"task {t} repeated records after a clean stop"
    finally:
        for w in workers:
            w.kill()


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_missing_group_id_is_one_line(tmp_path: Path) -> None:
    props = dist_props("127.0.0.1:1")
    del props["group.id"]
    _one_line_error(run_cli(write_properties(tmp_path / "w.properties", props)), "group.id")


@pytest.mark.slow
def test_bad_internal_topics_are_one_line(broker: Broker, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([
            NewTopic("plain-status", 1, 1, config={"cleanup.policy": "delete"}),
            NewTopic("two-configs", 2, 1, config={"cleanup.policy": "compact"})]).values():
        f.result(30)
    base = dist_props(broker.bootstrap_servers, group="bad")
    deleting = write_properties(tmp_path / "a.properties",
                                {**base, "status.storage.topic": "plain-status"})
    _one_line_error(run_cli(deleting), "plain-status", "cleanup.policy")
    split = write_properties(tmp_path / "b.properties",
                             {**base, "config.storage.topic": "two-configs"})
    _one_line_error(run_cli(split), "two-configs", "2 partitions")


@pytest.mark.slow
def test_a_worker_on_a_sasl_ssl_broker(tmp_path: Path) -> None:
    """The group member, the internal topics and the tasks all use the worker's
    security settings (Kafka's Java client names)."""
    with Broker(ssl=True, sasl=True) as secure:
        ca = secure.client_config()["ssl.ca.location"]
        props = {**dist_props(secure.bootstrap_servers),
                 "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                 "ssl.truststore.location": ca, "ssl.truststore.type": "PEM",
                 "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                     f'required username="admin" password="{ADMIN_PASSWORD}";'}
        worker = Worker(write_properties(tmp_path / "secure.properties", props))
        try:
            create(worker.url, **{"tasks.max": "2"})
            placed = wait_for("2 tasks RUNNING", lambda: spread(worker.url, 2), 60)
            assert set(placed.values()) == {worker.worker_id}
        finally:
            assert worker.stop() == 0, "".join(worker.lines)


@pytest.mark.slow
def test_the_eager_protocol_deals_the_work_round_robin(broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path, n=2, **{"connect.protocol": "eager"})
    try:
        create(workers[0].url, **{"tasks.max": "4"})
        placed = wait_for("4 tasks RUNNING on both", lambda: (
            p if (p := spread(workers[1].url, 4)) and len(set(p.values())) == 2 else None), 60)
        assert sorted(list(placed.values()).count(w.worker_id) for w in workers) == [2, 2]
        seqs = sequences(values(broker.bootstrap_servers, "out"))
        no_gaps(seqs)
    finally:
        for w in workers:
            w.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_leaves_the_group_and_exits_0(broker: Broker, tmp_path: Path, sig: int) -> None:
    worker = start_cluster(broker, tmp_path, n=1)[0]

    def members() -> int:
        """The group's members, by DescribeGroups (librdkafka describes only
        consumer groups, not ``connect`` ones)."""
        async def describe() -> int:
            client = await KafkaClient.connect(broker.bootstrap_servers)
            try:
                conn = await client.coordinator("cluster")
                resp = await conn.request(DescribeGroupsRequest(groups=["cluster"]), 5)
                return len(resp.groups[0].members)
            finally:
                await client.close()
        return asyncio.run(describe())

    wait_for("the worker in the group", lambda: members() == 1, 30)
    worker.proc.send_signal(sig)
    assert worker.proc.wait(30) == 0, "".join(worker.lines)
    # well before session.timeout.ms (6 s): the worker said LeaveGroup
    assert members() == 0


@pytest.mark.slow
def test_a_sink_connector_spread_over_two_workers(broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path, n=2)
    sink = tmp_path / "sink.txt"
    try:
        create(workers[0].url, **{"tasks.max": "2"})
        retry("POST", f"{workers[1].url}/connectors", {"name": "s", "config": {
            "connector.class": "FileStreamSink", "tasks.max": "2", "topics": "out",
            "file": str(sink)}}, ok=(201,))
        placed = wait_for("2 sink tasks RUNNING", lambda: (
            p if (s := status(workers[0].url, "s")) and len(s["tasks"]) == 2
            and all(t["state"] == "RUNNING" for t in s["tasks"])
            and (p := {t["id"]: t["worker_id"] for t in s["tasks"]}) else None), 60)
        assert set(placed.values()) <= {w.worker_id for w in workers}
        wait_for("the sink file to hold both tasks' records", lambda: sink.exists() and {
            line.split(":")[0] for line in sink.read_text().splitlines()} == {
            "task-0", "task-1"}, 60)
        wait_for("the sink group's offsets", lambda: call(
            "GET", f"{workers[1].url}/connectors/s/offsets")[1]["offsets"], 30)
    finally:
        for w in workers:
            w.kill()

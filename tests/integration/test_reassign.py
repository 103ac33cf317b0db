"""``odradek reassign`` (kafka-reassign-partitions.sh) and the replication
throttles, on a real 3-node cluster with real clients.

The must-show, scaled to CI: a partition of ~32 MB moved from broker 1 to
broker 3 with ``--throttle 4000000``; the new replica's size (DescribeLogDirs
to broker 3, sampled every 0.2 s) grows no faster than the throttle, while an
acks=all producer and a consumer on another topic (replicated on the same
brokers) carry on; ``--verify`` reports completion and removes the throttles.
The cluster measures its replication quotas over ``replication.quota.window.num``
= 2 windows of 1 s: with Kafka's 11 a quiet quota lets 10 s of the rate
through at once (docs/operations.md, "Moving partitions").
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.client.admin import alter_configs
from odradek.client.client import KafkaClient
from odradek.wire.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from tests.support.cluster import LocalCluster, assert_no_tracebacks, wait_for

pytestmark = pytest.mark.timeout(300)

RATE = 4_000_000
BROKER = 4  # the BROKER config resource
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "replication.quota.window.num": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}
THROTTLE_KEYS = {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas",
                 "follower.replication.throttled.replicas"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("reassign"), 3, overrides=OVERRIDES, metrics=True)
    c.format()
    c.start()
    try:
        _wait_three(c)
        yield c
    finally:
        c.stop()
        assert_no_tracebacks(c)


def _admin(c: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap})


def _wait_three(c: LocalCluster) -> None:
    wait_for("three live brokers",
             lambda: len(_admin(c).list_topics(timeout=5).brokers) == 3, 60, 0.3)


def _create(c: LocalCluster, name: str, assignment: list[list[int]]) -> None:
    admin = _admin(c)  # kept alive until the future is done
    (future,) = admin.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)]).values()
    future.result(30)
    wait_for(f"{name} has leaders", lambda: all(
        p.leader >= 0 for p in _admin(c).list_topics(name, timeout=5).topics[name]
        .partitions.values()), 30, 0.2)


def _fill(c: LocalCluster, topic: str, megabytes: int) -> None:
    """``megabytes`` of 10 kB records in batches of at most 256 kB (a fetch
    returns whole batches)."""
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20,
                  "batch.size": 262144, "queue.buffering.max.kbytes": 65536})
    value = b"v" * 10_000
    for _ in range(megabytes * 100):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0


def reassign(c: LocalCluster, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", "reassign", *args,
                           "--bootstrap-server", c.bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _plan(tmp: Path, moves: dict[tuple[str, int], list[int]]) -> Path:
    path = tmp / f"plan-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}))
    return path


def _replicas(c: LocalCluster, topic: str) -> list[int]:
    return list(_admin(c).list_topics(topic, timeout=5).topics[topic].partitions[0].replicas)


def _size_on(c: LocalCluster, node_id: int, topic: str) -> int:
    """The size of ``topic``-0 on ``node_id``'s disk, as that broker reports it
    (DescribeLogDirs); -1 when it has no replica."""
    async def ask() -> int:
        client = await KafkaClient.connect(c.nodes[node_id].address, timeout_s=5)
        try:
            resp = await client.request(DescribeLogDirsRequest(
                topics=[DescribableLogDirTopic(topic, [0])]), 4, 1)
        finally:
            await client.close()
        sizes = [p.partition_size for r in resp.results for t in r.topics for p in t.partitions
                 if t.name == topic and p.partition_index == 0 and not p.is_future_key]
        return max(sizes, default=-1)
    return asyncio.run(ask())


def _metric(c: LocalCluster, node_id: int, name: str) -> float:
    """One unlabelled series of a node's metrics endpoint."""
    with urllib.request.urlopen(c.metrics_url(node_id), timeout=10) as resp:
        text = resp.read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines()
              if line.startswith(name + " ")]
    assert values, f"{name} not exported by node {node_id}"
    return values[0]


def _dynamic(c: LocalCluster, kind: ResourceType, name: str) -> set[str]:
    """The throttle configs set on a broker or topic (not defaults)."""
    admin = _admin(c)  # kept alive until the future is done
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    entries = future.result(30)
    return {k for k, e in entries.items() if k in THROTTLE_KEYS and not e.is_default}


class _Traffic:
    """An acks=all producer and a consumer on another topic, run in threads."""

    def __init__(self, c: LocalCluster, topic: str) -> None:
        self.c, self.topic = c, topic
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.sent = 0
        self.received = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self) -> _Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.c.bootstrap, "acks": "all", "linger.ms": 0})

        def done(err: KafkaError | None, _msg: object, started: float) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.latencies.append(time.monotonic() - started)

        while not self.stop.is_set():
            started = time.monotonic()
            p.produce(self.topic, b"x" * 1000,
                      on_delivery=lambda e, m, s=started: done(e, m, s))
            self.sent += 1
            p.poll(0.02)
        if p.flush(30):
            self.errors.append("undelivered at the end")

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([self.topic])
        until = float("inf")  # after the stop: until every acknowledged record came, or 30 s
        try:
            while time.monotonic() < until:
                if self.stop.is_set():
                    if self.received >= len(self.latencies) and not self.threads[0].is_alive():
                        break
                    until = min(until, time.monotonic() + 30)
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(f"consumer: {msg.error()}")
                else:
                    self.received += 1
        finally:
            consumer.close()


def test_bad_plans_get_one_line_errors(cluster: LocalCluster, tmp_path: Path) -> None:
    """Malformed JSON, an unknown topic or broker, duplicate replicas, an empty
    plan and a missing action each give one line on stderr and exit 1, and
    nothing moves."""
    _create(cluster, "plain", [[1, 2]])
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"plain",')
    empty = tmp_path / "empty.json"
    empty.write_text('{"version":1,"partitions":[]}')
    cases = {
        "not valid JSON": ["--execute", "--reassignment-json-file", str(bad)],
        "Topic nosuch not found": ["--execute", "--reassignment-json-file",
                                   str(_plan(tmp_path, {("nosuch", 0): [1]}))],
        "non-existent brokerIDs: 9": ["--execute", "--reassignment-json-file",
                                      str(_plan(tmp_path, {("plain", 0): [1, 9]}))],
        "duplicate entries": ["--execute", "--reassignment-json-file",
                              str(_plan(tmp_path, {("plain", 0): [2, 2]}))],
        "Unknown topic partitions: plain-5": ["--verify", "--reassignment-json-file",
                                              str(_plan(tmp_path, {("plain", 5): [1]}))],
        "cannot be empty": ["--execute", "--reassignment-json-file", str(empty)],
        "exactly one action": ["--reassignment-json-file", str(empty)],
    }
    for message, args in cases.items():
        proc = reassign(cluster, *args, ok=False)
        assert proc.returncode == 1, (message, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("odradek: "), (message, proc.stderr)
        assert message in lines[0], (message, lines[0])
    assert _replicas(cluster, "plain") == [1, 2]


def test_throttle_configs_are_validated_and_described_with_their_sources(
        cluster: LocalCluster) -> None:
    """The topic lists are checked (Kafka's form) and reported as TOPIC_CONFIG;
    a cluster-default rate is reported as DYNAMIC_DEFAULT_BROKER_CONFIG."""
    _create(cluster, "described", [[1, 2]])
    admin = _admin(cluster)
    name = "leader.replication.throttled.replicas"

    def alter(kind: ResourceType, resource: str, key: str, value: str | None) -> None:
        op = (AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE)
        res = ConfigResource(kind, resource, incremental_configs=[
            ConfigEntry(key, value or "", incremental_operation=op)])
        (future,) = admin.incremental_alter_configs([res]).values()
        future.result(30)

    with pytest.raises(KafkaException, match=r"\[PartitionId\]:\[BrokerId\]"):
        alter(ResourceType.TOPIC, "described", name, "0-1")
    alter(ResourceType.TOPIC, "described", name, "0:1,0:2")
    _cluster_default(cluster, "follower.replication.throttled.rate", "123456")
    try:
        (topic,) = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, "described")]).values()
        entry = topic.result(30)[name]
        assert entry.value == "0:1,0:2" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

        def described() -> ConfigEntry | None:
            # Broker 2 answers from its own copy of the metadata, which has the
            # controller's ConfigRecord once it has replicated it.
            (broker,) = admin.describe_configs(
                [ConfigResource(ResourceType.BROKER, "2")]).values()
            entry = broker.result(30)["follower.replication.throttled.rate"]
            return entry if entry.value == "123456" else None
        rate = wait_for("broker 2 describing the cluster-default rate", described, 30)
        assert rate.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    finally:
        _cluster_default(cluster, "follower.replication.throttled.rate", None)
    assert _dynamic(cluster, ResourceType.BROKER, "2") == set()


def _cluster_default(c: LocalCluster, key: str, value: str | None) -> None:
    """Set (or delete) a cluster-default broker config (resource name "", which
    confluent-kafka's ConfigResource does not take)."""
    async def alter() -> None:
        client = await KafkaClient.connect(c.bootstrap, timeout_s=5)
        try:
            await alter_configs(client, BROKER, "", {key: value} if value else {},
                                [] if value else [key])
        finally:
            await client.close()
    asyncio.run(alter())


def test_generate_proposes_and_changes_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    """--generate prints the current assignment and a round-robin proposal over
    the broker list, keeping the replication factor; nothing moves."""
    _create(cluster, "gen", [[1, 2], [2, 1], [1, 2]])
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"gen"}],"version":1}')
    out = reassign(cluster, "--generate", "--topics-to-move-json-file", str(topics),
                   "--broker-list", "2,3").stdout.splitlines()
    current = json.loads(out[out.index("Current partition replica assignment") + 1])
    proposed = json.loads(out[out.index("Proposed partition reassignment configuration") + 1])
    assert [p["replicas"] for p in current["partitions"]] == [[1, 2], [2, 1], [1, 2]]
    assert [p["replicas"] for p in proposed["partitions"]] == [[2, 3], [3, 2], [2, 3]]
    assert all(p["log_dirs"] == ["any", "any"] for p in proposed["partitions"])
    assert _replicas(cluster, "gen") == [1, 2]


@pytest.mark.slow
def test_a_throttled_move_keeps_to_the_rate_and_verify_removes_the_throttle(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """~32 MB moved from broker 1 to broker 3 at 4 MB/s: after the first second no
    3 s window copies more than 1.3x the rate, the move takes most of the time
    the rate implies, the clients on another topic see no errors and acks=all
    latency stays low; --verify then reports completion and removes every
    throttle config."""
    _create(cluster, "big", [[1]])
    _create(cluster, "live", [[1, 3, 2]])
    _fill(cluster, "big", 32)
    total = _size_on(cluster, 1, "big")
    assert total > 30_000_000
    plan = _plan(tmp_path, {("big", 0): [3]})
    with _Traffic(cluster, "live") as traffic:
        out = reassign(cluster, "--execute", "--reassignment-json-file", str(plan),
                       "--throttle", str(RATE)).stdout
        started = time.monotonic()
        samples: list[tuple[float, int]] = []
        deadline = started + 90
        while time.monotonic() < deadline:
            size = _size_on(cluster, 3, "big")
            samples.append((time.monotonic() - started, size))
            if size >= total:
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        follower_rate = _metric(cluster, 3, "kafka_server_followerreplication_byte_rate")
        leader_rate = _metric(cluster, 1, "kafka_server_leaderreplication_byte_rate")
        # the throttle is in place while it moves
        assert _dynamic(cluster, ResourceType.BROKER, "3") >= {
            "leader.replication.throttled.rate", "follower.replication.throttled.rate"}
        assert _dynamic(cluster, ResourceType.TOPIC, "big") == {
            "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
        time.sleep(1)
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    rollback = json.loads(out.splitlines()[2])
    assert rollback["partitions"] == [
        {"topic": "big", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in out
    assert samples[-1][1] >= total, samples[-5:]
    first = next(t for t, s in samples if s > 0)
    worst = 0.0
    for t0, s0 in samples:
        if t0 < first + 1:
            continue
        later = [(t, s) for t, s in samples if t >= t0 + 3]
        if later:
            t1, s1 = later[0]
            worst = max(worst, (s1 - s0) / (t1 - t0) / RATE)
    print(f"moved {total} B in {elapsed:.1f} s ({total / elapsed / 1e6:.2f} MB/s); "
          f"worst 3 s window {worst:.2f}x the throttle")  # shown with pytest -s
    assert 0 < worst <= 1.3, (worst, samples)
    assert elapsed >= 0.7 * total / RATE, (elapsed, samples)
    assert 0 < follower_rate <= 1.3 * RATE and 0 < leader_rate <= 1.3 * RATE, (
        follower_rate, leader_rate)
    assert not traffic.errors, traffic.errors[:5]
    assert traffic.sent > 100 and traffic.received >= len(traffic.latencies) > 100
    p99 = sorted(traffic.latencies)[int(len(traffic.latencies) * 0.99)]
    assert p99 < 2.0, p99
    verify = ""
    for _ in range(100):
        verify = reassign(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
        if "is completed" in verify:
            break
        time.sleep(0.3)
    assert "Reassignment of partition big-0 is completed." in verify, verify
    assert "Clearing broker-level throttles on brokers 1,2,3" in verify
    assert "Clearing topic-level throttles on topic big" in verify
    assert _replicas(cluster, "big") == [3]
    for broker in ("1", "2", "3"):
        assert _dynamic(cluster, ResourceType.BROKER, broker) == set()
    assert _dynamic(cluster, ResourceType.TOPIC, "big") == set()


@pytest.mark.slow
def test_cancel_stops_a_move_and_restores_the_replicas(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    """A move at 500 kB/s is still under way (--list shows it); --cancel stops it,
    the replicas are the old ones again and the throttles are gone."""
    _create(cluster, "slowmove", [[1]])
    _fill(cluster, "slowmove", 8)
    plan = _plan(tmp_path, {("slowmove", 0): [2]})
    reassign(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "500000")
    listed = reassign(cluster, "--list").stdout
    assert "slowmove-0: replicas: 2,1. adding: 2. removing: 1." in listed, listed
    again = reassign(cluster, "--execute", "--reassignment-json-file", str(plan), ok=False)
    assert again.returncode == 1 and "existing partition assignment" in again.stderr
    assert "still in progress" in reassign(
        cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
    assert _dynamic(cluster, ResourceType.TOPIC, "slowmove")  # kept while in progress
    out = reassign(cluster, "--cancel", "--reassignment-json-file", str(plan)).stdout
    assert "Successfully cancelled partition reassignment(s) for: slowmove-0" in out
    wait_for("the old replicas", lambda: _replicas(cluster, "slowmove") == [1], 30, 0.2)
    assert "No partition reassignments found." in reassign(cluster, "--list").stdout
    assert _dynamic(cluster, ResourceType.TOPIC, "slowmove") == set()
    assert _dynamic(cluster, ResourceType.BROKER, "2") == set()


@pytest.mark.slow
def test_a_throttled_move_survives_a_cluster_restart(cluster: LocalCluster,
                                                      tmp_path: Path) -> None:
    """The whole cluster stopped during a throttled move comes back with the
    move and its throttle, finishes it, and --verify reports it completed."""
    _create(cluster, "restart", [[2]])
    _fill(cluster, "restart", 12)
    total = _size_on(cluster, 2, "restart")
    plan = _plan(tmp_path, {("restart", 0): [1]})
    reassign(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "2000000")
    wait_for("some copied", lambda: _size_on(cluster, 1, "restart") > 0, 30, 0.2)
    assert _size_on(cluster, 1, "restart") < total
    cluster.stop_all(clean=True)
    cluster.start()
    _wait_three(cluster)
    assert _dynamic(cluster, ResourceType.TOPIC, "restart")  # the throttle came back
    verify = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        verify = reassign(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
        if "is completed" in verify:
            break
        time.sleep(0.5)
    assert "Reassignment of partition restart-0 is completed." in verify, verify
    assert _replicas(cluster, "restart") == [1]
    assert _size_on(cluster, 1, "restart") == total
    assert _dynamic(cluster, ResourceType.TOPIC, "restart") == set()

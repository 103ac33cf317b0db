"""The must-show test of the metrics endpoint: a 3-node cluster under acks=all
load on a replication-factor-3 topic, each node's /metrics scraped; a node is
killed with SIGKILL and started again. Kafka's alerting signals must tell the
story: under-replicated partitions rise above 0 on the survivors and fall back
to 0, ISR shrinks and expands are counted, the leader count moves, and the
active controller count sums to 1 across the live nodes throughout."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import LocalCluster, wait_for
from tests.integration.test_metrics_endpoint import get, scrape
from tests.support.cluster import running

pytestmark = pytest.mark.timeout(300)

URP = "kafka_server_replicamanager_underreplicatedpartitions"
LEADERS = "kafka_server_replicamanager_leadercount"
SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
EXPANDS = "kafka_server_replicamanager_isrexpands_total"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"
MESSAGES_IN = 'kafka_server_brokertopicmetrics_messagesin_total{topic=""}'


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, controllers=3, metrics=True, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000",
        "replica.lag.time.max.ms": "5000", "min.insync.replicas": "2"})
    with running(c):
        yield c


def test_a_killed_node_shows_in_every_survivors_metrics_and_heals(
        cluster: LocalCluster) -> None:
    nodes = list(cluster.nodes)

    def scrape_all(ids: list[int]) -> dict[int, dict[str, float]]:
        return {i: scrape(cluster.metrics_url(i)) for i in ids}

    def total(ms: dict[int, dict[str, float]], name: str) -> float:
        return sum(m[name] for m in ms.values())

    for i in nodes:
        wait_for(f"node {i} alive", lambda i=i: get(cluster.metrics_url(i, "/healthz")) == (
            200, "ok\n"), 90)
        wait_for(f"node {i} ready", lambda i=i: get(cluster.metrics_url(i, "/readyz"))[0] == 200,
                 90)
    topic = f"load-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)

    delivered: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120_000})
        while not stop.is_set():
            with contextlib.suppress(BufferError):  # the queue full: poll, then again
                p.produce(topic, b"x" * 100,
                          on_delivery=lambda err, _m: err is None and delivered.append(1))
            p.poll(0.01)
        p.flush(60)
    loader = threading.Thread(target=produce, daemon=True)
    loader.start()
    try:
        # Under load, healthy: every partition fully replicated, one controller,
        # three leaders spread over the nodes.
        wait_for("records acknowledged", lambda: len(delivered) >= 200, 90)
        # (Leaders on two nodes at least: a survivor then leads a partition
        # whose ISR loses the victim, which is what URP and ISR shrinks count.)
        healthy = wait_for("a healthy cluster", lambda: (
            ms if total(ms := scrape_all(nodes), URP) == 0 and total(ms, ACTIVE) == 1
            and total(ms, LEADERS) == 3 and total(ms, MESSAGES_IN) > 0
            and sum(m[LEADERS] >= 1 for m in ms.values()) >= 2 else None), 90)
        victim = next(i for i in nodes if healthy[i][LEADERS] >= 1)
        survivors = [i for i in nodes if i != victim]
        shrinks_before = total(healthy, SHRINKS)
        leaders_before = {i: healthy[i][LEADERS] for i in survivors}

        cluster.kill(victim)
        down = wait_for("under-replicated partitions on the survivors", lambda: (
            ms if total(ms := scrape_all(survivors), URP) > 0 else None), 90)
        assert all(m[URP] <= m[LEADERS] for m in down.values())
        moved = wait_for("the victim's leadership moved to the survivors", lambda: (
            ms if total(ms := scrape_all(survivors), LEADERS) == 3 else None), 90)
        assert any(moved[i][LEADERS] > leaders_before[i] for i in survivors)
        assert total(moved, SHRINKS) > shrinks_before
        wait_for("one active controller among the survivors", lambda: total(
            scrape_all(survivors), ACTIVE) == 1, 90)
        acked = len(delivered)
        wait_for("acks=all records acknowledged with a node down",
                 lambda: len(delivered) >= acked + 200, 90)
        expands_before = total(scrape_all(survivors), EXPANDS)

        cluster.start(victim)
        healed = wait_for("every partition fully replicated again", lambda: (
            ms if total(ms := scrape_all(nodes), URP) == 0
            and all(m["kafka_server_replicamanager_partitioncount"] == 3 for m in ms.values())
            else None), 120)
        assert total(healed, EXPANDS) > expands_before
        assert total(healed, ACTIVE) == 1
        assert total(healed, LEADERS) == 3
        wait_for(f"node {victim} ready again", lambda: get(
            cluster.metrics_url(victim, "/readyz"))[0] == 200, 90)
    finally:
        stop.set()
        loader.join(90)

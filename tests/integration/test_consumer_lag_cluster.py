"""Consumer lag in a 3-node cluster: the group's coordinator reports the lag of
partitions other brokers lead (their ends from a background ListOffsets), only
the coordinator reports the group, and when the coordinator stops the next one
reports the same lag.

The nodes run in this process (LocalCluster writes and formats their
``server.properties``; each node is an :class:`odradek.testing.broker.Broker`
on those settings) so that each one's metrics registry can be rendered
without the metrics endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker
from odradek.testing.cluster import LocalCluster, wait_for
from tests.integration.scrape import series

pytestmark = pytest.mark.timeout(300)

TOPIC, GROUP = "lag-c", "lag-cg"


def _properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[LocalCluster, dict[int, Broker]]]:
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0"})
    cluster.format()
    brokers: dict[int, Broker] = {}
    try:
        for node_id, node in cluster.nodes.items():
            props = _properties(node.properties)
            props["odradek.metrics.listener"] = "127.0.0.1:0"  # the lag gauges come with it
            brokers[node_id] = Broker(data_dir=props["log.dirs"], **props).start()
        yield cluster, brokers
    finally:
        for b in brokers.values():
            b.stop()


def lag_by_node(brokers: dict[int, Broker]) -> dict[int, dict[int, int]]:
    """Node -> {partition: lag} of the group, for the nodes that report it."""
    out: dict[int, dict[int, int]] = {}
    for node_id, b in brokers.items():
        rows = {int(p): int(v) for (g, t, p), v in
                series(b, "kafka_consumergroup_current_offset").items()
                if g == GROUP and t == TOPIC}
        if rows:
            out[node_id] = {int(p): int(v) for (g, t, p), v in
                            series(b, "kafka_consumergroup_lag").items()
                            if g == GROUP and t == TOPIC}
    return out


def cli_lag(bootstrap: str) -> dict[int, int]:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "groups", "describe", GROUP, "--json",
         "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return {r["partition"]: r["lag"] for r in json.loads(proc.stdout)["partitions"]}


def test_coordinator_reports_remote_lag_and_the_next_one_after_it_stops(
        nodes: tuple[LocalCluster, dict[int, Broker]]) -> None:
    cluster, brokers = nodes
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for("three brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60)
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
    md = wait_for("the topic's leaders", lambda: (
        m := admin.list_topics(TOPIC, timeout=5)).topics[TOPIC].partitions and all(
            p.leader >= 0 for p in m.topics[TOPIC].partitions.values()) and m, 60)
    leaders = {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(3):
        for i in range(10):
            producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})
    offsets = [TopicPartition(TOPIC, p, 2 * (p + 1)) for p in range(3)]

    def committed() -> bool:  # again while the group's coordinator loads or moves
        done = consumer.commit(offsets=offsets, asynchronous=False) or []
        return len(done) == 3 and all(tp.error is None for tp in done)

    wait_for("the group's commit", committed, 60, interval_s=0.5)
    consumer.close()
    expected = {0: 8, 1: 6, 2: 4}
    wait_for("the CLI's lag", lambda: cli_lag(bootstrap) == expected, 60, interval_s=0.5)

    # The coordinator (one node, the only one with the group's series) reports
    # the lag of every partition, those led elsewhere included.
    found = wait_for("the coordinator's lag of every partition", lambda: (
        (by := lag_by_node(brokers)) and len(by) == 1
        and next(iter(by.values())) == expected and by), 60, interval_s=0.5)
    coordinator = next(iter(found))
    assert any(leader != coordinator for leader in leaders.values()), leaders  # remote ones

    # The coordinator goes: another node loads the group and reports the same.
    brokers.pop(coordinator).stop()
    rest = ",".join(f"127.0.0.1:{n.client_port}" for i, n in cluster.nodes.items()
                    if i != coordinator)
    moved = wait_for("the next coordinator's lag", lambda: (
        (by := lag_by_node(brokers)) and len(by) == 1
        and next(iter(by.values())) == expected and by), 120, interval_s=0.5)
    assert next(iter(moved)) != coordinator
    wait_for("the CLI's lag after the move", lambda: cli_lag(rest) == expected, 60,
             interval_s=0.5)

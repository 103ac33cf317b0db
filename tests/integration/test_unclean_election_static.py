"""``unclean.leader.election.enable`` from ``server.properties``: with no topic
or dynamic setting, the controllers' own file decides, as in Kafka.

Two brokers (4 and 5) host a partition beside three controllers. Broker 5
falls out of the ISR and stops, then broker 4 (the last ISR member) stops:
the partition has no leader. When broker 5 comes back, the controllers' file
allows an unclean election, so it leads alone and serves what it holds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from odradek.testing.cluster import LocalCluster
from tests.integration.groupclients import wait_until
from tests.support.cluster import running

pytestmark = pytest.mark.slow


def _partition(bootstrap: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000})
    try:
        p = admin.list_topics("u", timeout=5).topics["u"].partitions[0]
        return p.leader, sorted(p.isrs)
    except KafkaException as e:  # a broker still starting: ask again
        return -2, [str(e)]


def _brokers(admin: AdminClient) -> list[int]:
    try:
        return sorted(admin.list_topics(timeout=5).brokers)
    except KafkaException:  # no broker answers yet
        return []


def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce("u", v, partition=0)
    assert producer.flush(30) == 0


def test_server_properties_allow_an_unclean_election(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=2, overrides={
        "unclean.leader.election.enable": "true", "replica.lag.time.max.ms": "3000"})
    with running(cluster):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_until(lambda: _brokers(admin) == [4, 5], 60, "brokers 4 and 5 to register",
                   lambda: _brokers(admin))
        admin.create_topics([NewTopic("u", 1, replica_assignment=[[4, 5]])])["u"].result(30)
        wait_until(lambda: _partition(cluster.bootstrap) == (4, [4, 5]), 30,
                   "broker 4 to lead u-0 with both brokers in sync",
                   lambda: _partition(cluster.bootstrap))
        _produce(cluster.bootstrap, [f"in-sync-{i}".encode() for i in range(10)])
        cluster.kill(5)
        b4 = cluster.nodes[4].address
        wait_until(lambda: _partition(b4) == (4, [4]), 30, "broker 5 to leave the ISR")
        cluster.kill(4)
        cluster.start(5)
        b5 = cluster.nodes[5].address
        wait_until(lambda: _partition(b5)[0] == 5, 60,
                   "broker 5 to be elected uncleanly", lambda: _partition(b5))
        assert _partition(b5) == (5, [5])
        consumer = Consumer({"bootstrap.servers": b5, "group.id": "u-reader",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("u", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
        consumer.close()
        assert got == [f"in-sync-{i}".encode() for i in range(10)]

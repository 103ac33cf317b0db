"""A 3-node cluster whose client, inter-broker and controller listeners are all
SSL with required client certificates: the quorum forms, brokers register,
followers replicate (ISR of 3) and acks=all produces are consumed back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import LocalCluster, wait_for
from tests.support.cluster import assert_no_tracebacks


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path, controllers=3, tls=True)
    cluster.format()
    cluster.start()
    try:
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    assert_no_tracebacks(cluster)


def test_tls_cluster_replicates_with_acks_all(tls_cluster: LocalCluster) -> None:
    certs = tls_cluster.certs
    assert certs is not None
    conf = {"bootstrap.servers": tls_cluster.bootstrap, **certs.librdkafka_settings()}
    admin = AdminClient(conf)

    def registered() -> bool | None:
        return len(admin.list_topics(timeout=5).brokers) == 3 or None

    wait_for("3 brokers registered over TLS", registered, 60)
    for fut in admin.create_topics([NewTopic("secure", 3, 3, config={
            "min.insync.replicas": "2"})]).values():
        fut.result(timeout=30)

    def full_isr() -> bool | None:
        topic = admin.list_topics("secure", timeout=5).topics["secure"]
        parts = topic.partitions.values()
        return (len(parts) == 3 and all(len(p.isrs) == 3 for p in parts)) or None

    wait_for("every replica in sync over TLS", full_isr, 60)
    producer = Producer({**conf, "acks": "all", "enable.idempotence": "true"})
    values = [f"m{i}".encode() for i in range(300)]
    for v in values:
        producer.produce("secure", v, key=v)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": "tls", "auto.offset.reset": "earliest"})
    consumer.subscribe(["secure"])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)
    # The followers hold every record too: the high watermark passed them all.
    wait_for("the ISR still full after the produce", full_isr, 30)

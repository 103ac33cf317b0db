"""Consumer lag computed by the broker (broker/coordinators/lag_metrics.py), read from
its rendered metrics registry, against what ``odradek groups describe`` and
kafka-python's admin client compute, with real clients over real sockets."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from odradek.testing.broker import Broker
from odradek.testing.cluster import wait_for
from tests.integration.scrape import scalar, series


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**{"odradek.metrics.listener": "127.0.0.1:0"}) as b:
        yield b


def commit(consumer: Consumer) -> None:
    """Commit the consumed positions synchronously, again while the coordinator
    answers a retriable error (a rebalance or a KIP-848 epoch change under way)."""
    def once() -> bool:
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return True  # nothing new to commit
            raise
        return True
    wait_for("a commit", once, 60, interval_s=0.2)


def metrics_lag(broker: Broker, group: str) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(v) for (g, t, p), v in
            series(broker, "kafka_consumergroup_lag").items() if g == group}


def cli_lag(broker: Broker, group: str) -> dict[tuple[str, int], int]:
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "groups", "describe", group, "--json",
         "--bootstrap-server", broker.bootstrap_servers],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["partitions"]
    return {(r["topic"], r["partition"]): r["lag"] if r["lag"] is not None else -1
            for r in rows}


def kafka_python_lag(broker: Broker, group: str, topics: dict[str, int],
                     ) -> dict[tuple[str, int], int]:
    """kafka-exporter's rows as kafka-python computes them (its admin client's
    committed offsets, a consumer's end offsets): every partition of the
    committed topics, -1 where nothing is committed."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        committed = {(tp.topic, tp.partition): om.offset
                     for tp, om in admin.list_group_offsets(group)[group].items()}
        tps = [KTopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        ends = consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): (ends[tp] - committed[(tp.topic, tp.partition)]
                                            if (tp.topic, tp.partition) in committed else -1)
                for tp in tps}
    finally:
        admin.close()
        consumer.close()


def test_lag_matches_cli_and_kafka_python_while_producing_and_consuming(
        broker: Broker) -> None:
    topics = {"lag-a": 3, "lag-b": 2}
    for name, n in topics.items():
        broker.create_topic(name, n)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    stop = threading.Event()
    produced = [0]

    def produce() -> None:
        while not stop.is_set():
            for name, n in topics.items():
                for p in range(n):
                    producer.produce(name, f"v{produced[0]}".encode(), partition=p)
            produced[0] += 1
            producer.flush(10)
        producer.flush(10)

    writer = threading.Thread(target=produce)
    writer.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-g",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(list(topics))
        seen = 0
        consumed: set[tuple[str, int]] = set()
        every = {(t, p) for t, n in topics.items() for p in range(n)}
        try:
            # Consume and commit while the producer writes, until every partition
            # has a commit (a topic without one has no series, as in kafka-exporter)
            # and 150 records were read.
            deadline = time.monotonic() + 120
            while seen < 150 or consumed != every or seen % 10:
                assert time.monotonic() < deadline, (seen, consumed)
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                seen += 1
                consumed.add((msg.topic(), msg.partition()))
                if seen % 10 == 0:
                    commit(consumer)
            wait_for("records produced", lambda: produced[0] >= 30, 60)
            assert metrics_lag(broker, "lag-g"), "no lag series while consuming"
        finally:
            stop.set()
            writer.join(60)
        # Settled: the last commit (the 150th record's, synchronous) came before the
        # producer stopped; nothing is produced or committed from here on.
        assert not writer.is_alive()

        last: list[object] = []

        def agree() -> tuple[dict[tuple[str, int], int], ...] | None:
            ours = metrics_lag(broker, "lag-g")
            cli = cli_lag(broker, "lag-g")
            theirs = kafka_python_lag(broker, "lag-g", topics)
            last[:] = [ours, cli, theirs]
            return (ours, cli, theirs) if ours == cli == theirs else None

        try:
            ours, _, _ = wait_for("metrics, CLI and kafka-python agree on the lag", agree, 60,
                                  interval_s=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: metrics, CLI, kafka-python: {last}") from None
        assert set(ours) == {(t, p) for t, n in topics.items() for p in range(n)}
        assert sum(v for v in ours.values() if v > 0) > 0  # there is lag to report
        sums = {t: int(v) for (g, t), v in
                series(broker, "kafka_consumergroup_lag_sum").items() if g == "lag-g"}
        assert sums == {t: sum(v for (tt, _), v in ours.items() if tt == t and v >= 0)
                        for t in topics if any(tt == t for tt, _ in ours)}
        current = {(t, int(p)): int(v) for (g, t, p), v in
                   series(broker, "kafka_consumergroup_current_offset").items() if g == "lag-g"}
        ends = {(t, p): current[(t, p)] + lag for (t, p), lag in ours.items() if lag >= 0}
        assert all(end == produced[0] for end in ends.values()), (ends, produced[0])
        assert series(broker, "kafka_consumergroup_members")[("lag-g",)] == 1
        assert scalar(broker, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") >= 1
        rebalances = "kafka_server_group_coordinator_metrics_group_rebalance_count"
        assert series(broker, rebalances)[("classic",)] >= 1  # the consumer's join
    finally:
        consumer.close()
    wait_for("the group empty once its consumer left", lambda: series(
        broker, "kafka_consumergroup_members").get(("lag-g",)) == 0, 60)
    assert scalar(broker, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_read_committed_lag_stops_at_an_open_transaction(broker: Broker) -> None:
    broker.create_topic("lag-txn", 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(5):
        plain.produce("lag-txn", f"p{i}".encode())
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-txn-g",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("lag-txn", 0, 5)], asynchronous=False)
    consumer.close()
    txn = Producer({"bootstrap.servers": broker.bootstrap_servers,
                    "transactional.id": "lag-txn-producer"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(4):
        txn.produce("lag-txn", f"t{i}".encode())
    txn.flush(10)
    key = ("lag-txn-g", "lag-txn", "0")
    # Open transaction: 4 records past the commit, none readable by read_committed.
    wait_for("lag 4, read_committed lag 0", lambda: (
        series(broker, "kafka_consumergroup_lag").get(key) == 4
        and series(broker, "odradek_consumergroup_lag_stable").get(key) == 0), 60)
    assert series(broker, "odradek_consumergroup_lag_stable_sum")[key[:2]] == 0
    txn.commit_transaction(30)
    # Committed: the records and the marker are past the commit for both.
    wait_for("both lags 5 after the commit marker", lambda: (
        series(broker, "kafka_consumergroup_lag").get(key) == 5
        and series(broker, "odradek_consumergroup_lag_stable").get(key) == 5), 60)
    assert cli_lag(broker, "lag-txn-g") == {("lag-txn", 0): 5}


def test_deleted_topic_leaves_the_lag_series(broker: Broker) -> None:
    broker.create_topic("lag-gone", 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-gone-g",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("lag-gone", 0, 0)], asynchronous=False)
    consumer.close()
    wait_for("the uncommitted partition's lag at -1", lambda: series(
        broker, "kafka_consumergroup_lag").get(("lag-gone-g", "lag-gone", "1")) == -1, 60)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.delete_topics(["lag-gone"])
    finally:
        admin.close()
    wait_for("no lag series of a deleted topic", lambda: not any(
        t == "lag-gone" for _, t, _ in series(broker, "kafka_consumergroup_lag")), 60)
    assert not any(t == "lag-gone" for _, t, _ in
                   series(broker, "kafka_consumergroup_current_offset"))


def test_consumer_protocol_group_counted_with_its_lag(broker: Broker) -> None:
    broker.create_topic("lag-848", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce("lag-848", f"r{i}".encode(), partition=i % 2)
    producer.flush(10)
    before = series(broker, "kafka_server_group_coordinator_metrics_group_rebalance_count")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lag-848-g",
                         "group.protocol": "consumer", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["lag-848"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 3:
            assert time.monotonic() < deadline, got
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got += 1
        commit(consumer)
        wait_for("the KIP-848 group's member and lag rendered", lambda: (
            series(broker, "kafka_consumergroup_members").get(("lag-848-g",)) == 1
            and len([k for k in series(broker, "kafka_consumergroup_lag")
                     if k[0] == "lag-848-g"]) == 2), 60)
        ours = metrics_lag(broker, "lag-848-g")
        assert ours == cli_lag(broker, "lag-848-g") == kafka_python_lag(
            broker, "lag-848-g", {"lag-848": 2})
        counts = series(broker, "kafka_server_group_coordinator_metrics_consumer_group_count")
        assert sum(counts.values()) >= 1
        after = series(broker, "kafka_server_group_coordinator_metrics_group_rebalance_count")
        assert after[("consumer",)] > before.get(("consumer",), 0)
    finally:
        consumer.close()

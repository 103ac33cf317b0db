"""The metric families beyond traffic and replication, on one real broker with
real clients: the controller queue's times, the metadata log as KRaft's
raft-metrics describe it (a single node's quorum of one), the log cleaner's
passes and ratios, client quota sensors, and connections created and closed
per listener. Elections across nodes are in test_metrics_cluster_controller.py."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka import Producer

from odradek.testing import Broker
from odradek.testing.cluster import wait_for
from odradek.wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from tests.integration.scrape import scalar, series
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(180)

METRICS = {"odradek.metrics.listener": "127.0.0.1:0"}
QUEUE = "kafka_controller_controllereventmanager_eventqueuetimems"
PROCESSING = "kafka_controller_controllereventmanager_eventqueueprocessingtimems"
RAFT = "kafka_server_raftmetrics_"


def test_controller_queue_times_count_every_metadata_write() -> None:
    with Broker(**METRICS) as broker:
        before = scalar(broker, QUEUE + "_count")
        assert scalar(broker, PROCESSING + "_count") == before
        for i in range(5):
            broker.create_topic(f"cq-{i}-{uuid.uuid4().hex[:6]}")
        assert scalar(broker, QUEUE + "_count") == before + 5
        assert scalar(broker, PROCESSING + "_count") == before + 5
        for name in (QUEUE, PROCESSING):
            quantiles = series(broker, name)
            assert set(quantiles) == {(q,) for q in ("0.5", "0.75", "0.95", "0.98", "0.99",
                                                     "0.999")}
            assert all(v >= 0 for v in quantiles.values())
        # A write commits (an fsync of the journal): it takes some time.
        assert series(broker, PROCESSING)[("0.99",)] > 0
        # One node elects no leaders: every partition is its own from the start.
        elections = "kafka_controller_controllerstats_leaderelectionrateandtimems"
        assert scalar(broker, elections + "_count") == 0
        assert scalar(broker, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0


def test_a_single_node_reports_itself_the_leader_of_a_quorum_of_one() -> None:
    with Broker(**METRICS) as broker:
        state = broker.app.state
        assert state is not None
        assert series(broker, RAFT + "current_state") == {("leader",): 1.0}
        assert scalar(broker, RAFT + "current_leader") == state.node_id
        assert scalar(broker, RAFT + "current_vote") == state.node_id
        assert scalar(broker, RAFT + "current_epoch") == state.metadata.epoch
        hw = scalar(broker, RAFT + "high_watermark")
        assert hw == scalar(broker, RAFT + "log_end_offset") == state.metadata.end_offset() > 0
        broker.create_topic(f"raft-{uuid.uuid4().hex[:6]}", partitions=3)
        assert scalar(broker, RAFT + "high_watermark") > hw  # a TopicRecord, 3 PartitionRecords
        avg, top = scalar(broker, RAFT + "commit_latency_avg"), scalar(
            broker, RAFT + "commit_latency_max")
        assert 0 < avg <= top


def _roll(producer: Producer, topic: str, key: bytes) -> None:
    """Flush, let ``segment.ms`` pass, and append one record: the segment rolls."""
    assert producer.flush(30) == 0
    time.sleep(0.15)
    producer.produce(topic, b"roll", key=key)
    assert producer.flush(30) == 0


def test_the_cleaner_reports_its_passes_and_the_dirt_it_leaves() -> None:
    topic = f"clean-{uuid.uuid4().hex[:6]}"
    with Broker(**METRICS, **{"log.cleaner.backoff.ms": "50"}) as broker:
        broker.create_topic(topic, configs={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.5"})
        assert scalar(broker, "odradek_log_cleaner_passes_total") == 0
        assert scalar(broker, "kafka_log_logcleaner_time_since_last_run_ms") == 0
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 2})
        # A hundred keys written twice: the first pass keeps about half the bytes.
        for i in range(200):
            producer.produce(topic, f"value-{i}".encode(), key=f"k{i % 100}".encode())
        _roll(producer, topic, b"roll-1")
        wait_for("a cleaner pass", lambda: scalar(
            broker, "odradek_log_cleaner_passes_total") >= 1, 60)
        recopy = scalar(broker, "kafka_log_logcleaner_cleaner_recopy_percent")
        assert 20 < recopy < 80, recopy
        assert scalar(broker, "odradek_log_cleaner_read_bytes_total") > scalar(
            broker, "odradek_log_cleaner_written_bytes_total") > 0
        assert 0 <= scalar(broker, "kafka_log_logcleaner_max_clean_time_secs") < 30
        # Twenty keys overwritten: dirt below min.cleanable.dirty.ratio, so the log
        # is not cleaned again, and the ratio stays what every look reports.
        for i in range(20):
            producer.produce(topic, f"again-{i}".encode(), key=f"k{i}".encode())
        _roll(producer, topic, b"roll-2")
        dirty = wait_for("the dirt the cleaner left", lambda: (
            v if 5 < (v := scalar(broker, "kafka_log_logcleanermanager_max_dirty_percent")) < 50
            else None), 60)
        assert dirty < 50  # below min.cleanable.dirty.ratio: not due
        assert scalar(broker, "odradek_log_cleaner_passes_total") == 1
        since = scalar(broker, "kafka_log_logcleaner_time_since_last_run_ms")
        wait_for("time since the last pass grows", lambda: scalar(
            broker, "kafka_log_logcleaner_time_since_last_run_ms") > since, 30)


def test_quota_sensors_report_byte_rate_and_throttle_time_by_client() -> None:
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    with Broker(**METRICS, **{"quota.window.num": "3", "quota.window.size.seconds": "1"}
                ) as broker:
        broker.create_topic(topic)
        admin = RawClient(broker.bootstrap_servers)
        resp = admin.request(AlterClientQuotasRequest(validate_only=False, entries=[EntryData(
            entity=[EntityData(entity_type="client-id", entity_name="limited")],
            ops=[OpData(key="producer_byte_rate", value=10_000, remove=False)])]), 1)
        admin.sock.close()
        assert [e.error_code for e in resp.entries] == [0]
        assert series(broker, "kafka_server_quota_byte_rate") == {}
        limited = Producer({"bootstrap.servers": broker.bootstrap_servers,
                            "client.id": "limited", "linger.ms": 0})
        free = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "free"})
        for _ in range(5):  # 5 x 20 KB against 10 KB/s: throttled
            limited.produce(topic, b"x" * 20_000)
            limited.flush(30)
        free.produce(topic, b"y" * 20_000)
        assert free.flush(30) == 0
        key = ("Produce", "", "limited")
        rates = series(broker, "kafka_server_quota_byte_rate")
        assert set(rates) == {key} and rates[key] > 10_000  # over its quota: throttled
        throttle = series(broker, "kafka_server_quota_throttle_time")
        assert set(throttle) == {key} and throttle[key] > 0
        assert series(broker, "kafka_server_quota_request_time") == {}


def test_connections_created_and_closed_are_counted_per_listener() -> None:
    with Broker(**METRICS) as broker:
        name = "kafka_server_socket_server_metrics_connection_"
        lis = ("PLAINTEXT",)
        created = series(broker, name + "creation_total").get(lis, 0)
        closed = series(broker, name + "close_total").get(lis, 0)
        host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
        socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(4)]
        try:
            wait_for("four connections admitted", lambda: series(
                broker, name + "creation_total").get(lis, 0) == created + 4, 30)
            assert series(broker, name + "count")[lis] >= 4
            assert series(broker, name + "creation_rate")[lis] > 0
        finally:
            for s in socks:
                s.close()
        wait_for("four connections closed", lambda: series(
            broker, name + "close_total").get(lis, 0) == closed + 4, 30)
        assert series(broker, name + "creation_total")[lis] == created + 4

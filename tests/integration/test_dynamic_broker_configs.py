"""Broker configs as Kafka reports them, and dynamic broker configs (KIP-226),
with real admin clients over real sockets (confluent-kafka, kafka-python; the
cluster default ``""``, which neither client can name, with the project's own
encoder). Each dynamic kind is shown to take effect without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from odradek.metadata.broker_configs import BROKER_CONFIGS, DYNAMIC
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_configs_request import AlterableConfig as LConfig
from odradek.wire.messages.alter_configs_request import AlterConfigsRequest
from odradek.wire.messages.alter_configs_request import AlterConfigsResource as LResource
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.support.rawclient import RawClient

BROKER = 4
SET, DELETE = 0, 1


def _wait_for(what: str, check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _admin(b: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers})


def _incremental(admin: AdminClient, name: str, value: str | None, *, node: str = "1",
                 validate_only: bool = False) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    res = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)


def _describe_broker(admin: AdminClient, node: str = "1") -> dict[str, Any]:
    res = ConfigResource(ConfigResource.Type.BROKER, node)
    configs: dict[str, Any] = admin.describe_configs([res])[res].result(10)
    return configs


def _raw_alter(raw: RawClient, resource: str, name: str, value: str | None) -> Any:
    """IncrementalAlterConfigs v1 for one broker resource (``""``: the cluster default)."""
    op = SET if value is not None else DELETE
    resp = raw.request(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        BROKER, resource, [AlterableConfig(name, op, value)])]), 1)
    return resp.responses[0]


def _raw_describe(raw: RawClient, resource: str) -> Any:
    resp = raw.request(DescribeConfigsRequest(
        resources=[DescribeConfigsResource(BROKER, resource, None)], include_synonyms=True), 4)
    return resp.results[0]


def test_kafka_python_describes_a_broker_with_synonyms_in_kafkas_order() -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType

    with Broker(**{"log.retention.hours": "24"}) as b:
        raw = RawClient(b.bootstrap_servers)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            assert _raw_alter(raw, "", "log.retention.ms", "5000").error_code == 0
            out = admin.alter_configs([KResource(ConfigResourceType.BROKER, "1",
                                                 {"log.retention.ms": "7000"})])
            assert out == {"broker": {"1": "OK"}}
            described = admin.describe_configs([KResource(ConfigResourceType.BROKER, "1")],
                                               include_synonyms=True, config_filter="all")
            configs = described["broker"]["1"]
        finally:
            admin.close()
            raw.close()
    assert set(BROKER_CONFIGS) <= set(configs)
    ms = configs["log.retention.ms"]
    assert (ms["value"], ms["config_source"], ms["read_only"], ms["config_type"]) == (
        "7000", "DYNAMIC_BROKER_CONFIG", False, "LONG")
    assert [(s["name"], s["value"], s["source"]) for s in ms["synonyms"]] == [
        ("log.retention.ms", "7000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.ms", "5000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    hours = configs["log.retention.hours"]  # read-only; the finer synonyms are dropped
    assert (hours["value"], hours["read_only"], hours["config_type"]) == ("24", True, "INT")
    assert [(s["name"], s["source"]) for s in hours["synonyms"]] == [
        ("log.retention.hours", "STATIC_BROKER_CONFIG"), ("log.retention.hours", "DEFAULT_CONFIG")]
    roll = configs["log.roll.ms"]  # Kafka's null default: no value, no synonyms
    assert (roll["value"], roll["config_source"], roll["synonyms"]) == (
        None, "DEFAULT_CONFIG", [])
    dirs = configs["log.dirs"]
    assert (dirs["config_source"], dirs["read_only"]) == ("STATIC_BROKER_CONFIG", True)
    size = configs["message.max.bytes"]
    assert (size["value"], size["config_source"], size["read_only"], size["config_type"]) == (
        "1048588", "DEFAULT_CONFIG", False, "INT")


def test_the_cluster_default_resource_lists_only_the_dynamic_defaults() -> None:
    with Broker() as b:
        raw = RawClient(b.bootstrap_servers)
        try:
            assert _raw_describe(raw, "").configs == []
            assert _raw_alter(raw, "", "log.cleaner.threads", "2").error_code == 0
            result = _raw_describe(raw, "")
            assert [(c.name, c.value, c.config_source, c.read_only) for c in result.configs] == [
                ("log.cleaner.threads", "2", 3, False)]
            assert [(s.name, s.value, s.source) for s in result.configs[0].synonyms] == [
                ("log.cleaner.threads", "2", 3)]
            assert _raw_alter(raw, "", "log.cleaner.threads", None).error_code == 0  # DELETE
            assert _raw_describe(raw, "").configs == []
            other = _raw_describe(raw, "7")
            assert other.error_code == ErrorCode.INVALID_REQUEST
            assert other.error_message == (
                "Unexpected broker id, expected 1 or empty string, but received 7")
            assert _raw_alter(raw, "7", "log.cleaner.threads", "2").error_code == (
                ErrorCode.INVALID_REQUEST)
        finally:
            raw.close()


def _produce(b: Broker, topic: str, value: bytes, **conf: Any) -> KafkaError | None:
    """Produce one record and wait for its delivery; the error, or None."""
    producer = Producer({"bootstrap.servers": b.bootstrap_servers, **conf})
    result: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: result.append(err))
    producer.flush(15)
    assert result, "no delivery report"
    return result[0]


def test_message_max_bytes_lowered_then_a_larger_produce_is_refused() -> None:
    with Broker() as b:
        admin = _admin(b)
        admin.create_topics([NewTopic("sized", 1, 1)])["sized"].result(10)
        assert _produce(b, "sized", b"x" * 5000) is None
        _incremental(admin, "message.max.bytes", "2000")
        err = _produce(b, "sized", b"x" * 5000)
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert _produce(b, "sized", b"x" * 500) is None  # small ones still go
        entry = _describe_broker(admin)["message.max.bytes"]
        assert (entry.value, entry.source) == ("2000", 2)  # DYNAMIC_BROKER_CONFIG
        _incremental(admin, "message.max.bytes", None)  # DELETE: back to the default
        assert _produce(b, "sized", b"x" * 5000) is None
        entry = _describe_broker(admin)["message.max.bytes"]
        assert (entry.value, entry.source) == ("1048588", 5)


def test_a_topic_without_override_takes_a_new_cluster_default_retention() -> None:
    with Broker(**{"log.segment.bytes": "1000", "log.retention.check.interval.ms": "50"}) as b:
        admin = _admin(b)
        futures = admin.create_topics([NewTopic("plain", 1, 1),
                                       NewTopic("kept", 1, 1, config={"retention.ms": "-1"})])
        for f in futures.values():
            f.result(10)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(30):
            for topic in ("plain", "kept"):
                producer.produce(topic, b"v" * 200, key=str(i).encode())
                producer.poll(0)
            producer.flush(10)  # one batch per record: segments roll every few
        raw = RawClient(b.bootstrap_servers)
        try:
            assert _raw_alter(raw, "", "log.retention.ms", "1").error_code == 0
        finally:
            raw.close()
        plain = b.app.partitions.get("plain", 0)
        kept = b.app.partitions.get("kept", 0)
        assert plain is not None and kept is not None
        _wait_for("retention of 'plain'", lambda: plain.log.log_start_offset > 0)
        assert kept.log.log_start_offset == 0
        res = ConfigResource(ConfigResource.Type.TOPIC, "plain")
        entry = admin.describe_configs([res])[res].result(10)["retention.ms"]
        assert (entry.value, entry.source) == ("1", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG


def test_min_insync_replicas_raised_dynamically_refuses_acks_all() -> None:
    with Broker() as b:
        admin = _admin(b)
        admin.create_topics([NewTopic("isr", 1, 1)])["isr"].result(10)
        _incremental(admin, "min.insync.replicas", "2")
        err = _produce(b, "isr", b"v", acks="all", retries=0)
        assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS
        assert _produce(b, "isr", b"v", acks=1) is None
        _incremental(admin, "min.insync.replicas", None)
        assert _produce(b, "isr", b"v", acks="all", retries=0) is None


def test_max_connections_per_ip_lowered_closes_new_connections() -> None:
    with Broker() as b:
        raw = RawClient(b.bootstrap_servers)  # the only client of this broker
        try:
            assert _raw_alter(raw, "1", "max.connections.per.ip", "1").error_code == 0
            second = RawClient(b.bootstrap_servers, timeout_s=5)
            try:
                assert second.is_closed_by_peer()
            finally:
                second.close()
            assert _raw_alter(raw, "1", "max.connections.per.ip", None).error_code == 0
            third = RawClient(b.bootstrap_servers)
            try:
                assert third.request(ApiVersionsRequest(), 0).error_code == 0
            finally:
                third.close()
        finally:
            raw.close()


def test_log_cleaner_backoff_shortened_dynamically_starts_cleaning() -> None:
    with Broker(**{"log.cleaner.backoff.ms": "3600000", "log.segment.bytes": "2000"}) as b:
        admin = _admin(b)
        new = NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([new])["compacted"].result(10)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(60):
            producer.produce("compacted", b"v" * 100, key=f"k{i % 3}".encode())
            producer.flush(10)
        logs = b.app.partitions.logs
        assert logs.cleaner_stats["passes"] == 0  # the next pass is an hour away
        _incremental(admin, "log.cleaner.backoff.ms", "100")
        _wait_for("a cleaner pass", lambda: logs.cleaner_stats["passes"] >= 1, 60)


def test_read_only_unknown_and_bad_values_are_refused_in_kafkas_words() -> None:
    with Broker() as b:
        admin = _admin(b)
        with pytest.raises(Exception, match=r"Cannot update these configs dynamically: "
                                            r"Set\(log\.dirs\)") as info:
            _incremental(admin, "log.dirs", "/elsewhere")
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
        with pytest.raises(Exception) as info:
            _incremental(admin, "no.such.config", "1")
        assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
        with pytest.raises(Exception, match=r"message\.max\.bytes") as info:
            _incremental(admin, "message.max.bytes", "lots")
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
        assert _describe_broker(admin)["message.max.bytes"].source == 5  # nothing changed


def test_validate_only_checks_and_changes_nothing() -> None:
    with Broker() as b:
        admin = _admin(b)
        _incremental(admin, "log.segment.bytes", "4096", validate_only=True)
        assert _describe_broker(admin)["log.segment.bytes"].source == 5
        assert b.config.dynamic_broker == {}
        with pytest.raises(Exception, match="Cannot update"):
            _incremental(admin, "node.id", "3", validate_only=True)


def test_alter_configs_replaces_the_broker_resource_set() -> None:
    with Broker() as b:
        raw = RawClient(b.bootstrap_servers)
        try:
            for name, value in (("log.segment.bytes", "4096"), ("log.cleaner.threads", "2")):
                assert _raw_alter(raw, "1", name, value).error_code == 0
            resp = raw.request(AlterConfigsRequest(resources=[LResource(
                BROKER, "1", [LConfig("log.cleaner.threads", "3")])]), 2)
            assert resp.responses[0].error_code == 0
            assert b.config.dynamic_broker == {"log.cleaner.threads": "3"}
            resp = raw.request(AlterConfigsRequest(resources=[LResource(
                BROKER, "1", [LConfig("listeners", "PLAINTEXT://:1")])]), 2)
            assert resp.responses[0].error_code == ErrorCode.INVALID_REQUEST
            assert resp.responses[0].error_message == (
                "Cannot update these configs dynamically: Set(listeners)")
        finally:
            raw.close()


def test_dynamic_configs_survive_a_restart(tmp_path: Any) -> None:
    with Broker(data_dir=str(tmp_path)) as b:
        admin = _admin(b)
        admin.create_topics([NewTopic("sized", 1, 1)])["sized"].result(10)
        _incremental(admin, "message.max.bytes", "2000")
    with Broker(data_dir=str(tmp_path)) as b:
        err = _produce(b, "sized", b"x" * 5000)
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
        entry = _describe_broker(_admin(b))["message.max.bytes"]
        assert (entry.value, entry.source) == ("2000", 2)


def test_every_dynamic_config_is_accepted() -> None:
    samples = {"log.cleanup.policy": "compact", "compression.type": "lz4",
               "log.message.timestamp.type": "LogAppendTime", "log.preallocate": "true",
               "unclean.leader.election.enable": "true", "log.cleaner.min.cleanable.ratio": "0.3",
               "max.connections.per.ip.overrides": "10.0.0.1:5"}
    with Broker() as b:
        raw = RawClient(b.bootstrap_servers)
        try:
            for name in sorted(DYNAMIC):
                value = samples.get(name, "100000")
                got = _raw_alter(raw, "", name, value)
                assert (name, got.error_code, got.error_message) == (name, 0, None)
        finally:
            raw.close()
        assert b.config.dynamic_default == {n: samples.get(n, "100000") for n in DYNAMIC}


@pytest.mark.timeout(240)
def test_cluster_dynamic_configs_are_forwarded_replicated_and_applied_per_broker(
        tmp_path: Any) -> None:
    """A cluster: alters sent to a broker that is not the controller reach the
    controller, the ConfigRecords reach every node, and each applies the cluster
    default and only its own per-broker value."""
    from tests.support.cluster import LocalCluster, active_controller, wait_for

    cluster = LocalCluster(tmp_path, controllers=3)
    cluster.format()
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3 or None, 60)
        futures = admin.create_topics([NewTopic("spread", 3, 3)])
        futures["spread"].result(30)
        controller = active_controller(cluster.bootstrap)
        node = next(n for n in cluster.nodes if n != controller)
        other = next(n for n in cluster.nodes if n not in (node, controller))
        raw = RawClient(cluster.nodes[node].address)
        try:
            assert _raw_alter(raw, "", "message.max.bytes", "3000").error_code == 0
        finally:
            raw.close()
        _incremental(admin, "message.max.bytes", "2000", node=str(node))

        def size_on(n: int) -> tuple[str, int] | None:
            entry = _describe_broker(admin, str(n))["message.max.bytes"]
            return (entry.value, entry.source) if entry.source != 5 else None

        wait_for("node's own value", lambda: size_on(node) == ("2000", 2) or None, 30)
        wait_for("the cluster default", lambda: size_on(other) == ("3000", 3) or None, 30)
        leaders = {p.id: p.leader for p in admin.list_topics("spread", timeout=10)
                   .topics["spread"].partitions.values()}
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        results: dict[int, KafkaError | None] = {}
        for partition, leader in leaders.items():
            if leader in (node, other):
                producer.produce("spread", b"x" * 2500, partition=partition,
                                 on_delivery=lambda err, msg: results.__setitem__(
                                     msg.partition(), err))
        producer.flush(30)
        assert {leaders[p] for p in results} == {node, other}
        for partition, err in results.items():
            if leaders[partition] == node:
                assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
            else:
                assert err is None
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    for n in cluster.nodes.values():  # no node hit an internal error on the way
        assert "Traceback" not in n.log_path.read_text(errors="replace")

"""Describe and alter configs, and describe the cluster, with real admin clients."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from odradek.metadata.topic_configs import TOPIC_CONFIGS
from odradek.testing.broker import Broker


def _admin(b: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers})


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs: dict[str, ConfigEntry] = admin.describe_configs([res])[res].result(10)
    return configs


def test_describe_lists_every_config_with_source() -> None:
    with Broker(**{"log.retention.ms": "3600000"}) as b:
        admin = _admin(b)
        new = NewTopic("cfg", 1, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([new])["cfg"].result(10)
        configs = _describe(admin, "cfg")
        assert set(configs) == set(TOPIC_CONFIGS)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["cleanup.policy"].source == 1  # dynamic topic config
        assert configs["retention.ms"].value == "3600000"
        assert configs["retention.ms"].source == 4  # static broker config
        assert configs["segment.bytes"].value == "1073741824"
        assert configs["segment.bytes"].source == 5  # default


def test_incremental_alter_set_delete_append() -> None:
    with Broker() as b:
        admin = _admin(b)
        admin.create_topics([NewTopic("inc", 1, 1)])["inc"].result(10)
        res = ConfigResource(
            ConfigResource.Type.TOPIC, "inc",
            incremental_configs=[
                ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("cleanup.policy", "compact",
                            incremental_operation=AlterConfigOpType.APPEND),
            ],
        )
        admin.incremental_alter_configs([res])[res].result(10)
        configs = _describe(admin, "inc")
        assert configs["retention.ms"].value == "1000"
        assert configs["cleanup.policy"].value == "delete,compact"
        res = ConfigResource(
            ConfigResource.Type.TOPIC, "inc",
            incremental_configs=[
                ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
            ],
        )
        admin.incremental_alter_configs([res])[res].result(10)
        assert _describe(admin, "inc")["retention.ms"].value == "604800000"
        bad = ConfigResource(
            ConfigResource.Type.TOPIC, "inc",
            incremental_configs=[
                ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        with pytest.raises(Exception, match="INVALID_CONFIG"):
            admin.incremental_alter_configs([bad])[bad].result(10)


def test_alter_configs_replaces_the_override_set() -> None:
    with Broker() as b:
        admin = _admin(b)
        new = NewTopic("alt", 1, 1, config={"retention.ms": "5000"})
        admin.create_topics([new])["alt"].result(10)
        res = ConfigResource(ConfigResource.Type.TOPIC, "alt", set_config={"segment.ms": "60000"})
        with pytest.warns(DeprecationWarning):  # the client's own notice; the API still works
            admin.alter_configs([res])[res].result(10)
        configs = _describe(admin, "alt")
        assert configs["segment.ms"].value == "60000"
        assert configs["retention.ms"].value == "604800000"  # no longer overridden


def test_describe_unknown_topic_fails() -> None:
    with Broker() as b, pytest.raises(Exception, match="UNKNOWN_TOPIC"):
        _describe(_admin(b), "missing")


def test_kafka_python_describe_configs_and_cluster() -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewTopic as KNewTopic

    with Broker() as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            admin.create_topics([KNewTopic("kcfg", 1, 1, topic_configs={"retention.ms": "42"})])
            result = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kcfg")])
            text = repr(result)
            assert "retention.ms" in text and "42" in text
            cluster = admin.describe_cluster()
            assert cluster["controller_id"] == 1
            assert [br["broker_id"] for br in cluster["brokers"]] == [1]
            assert cluster["cluster_id"]
        finally:
            admin.close()


def test_kafka_python_describe_log_dirs_reports_partition_sizes() -> None:
    from kafka import KafkaAdminClient, KafkaProducer

    with Broker() as b:
        admin_client = _admin(b)  # keep a reference until the future resolves
        admin_client.create_topics([NewTopic("dirs", 2, 1)])["dirs"].result(10)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        for _ in range(100):
            producer.send("dirs", b"x" * 100, partition=0)
        producer.flush(10)
        producer.close()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            text = repr(admin.describe_log_dirs())
        finally:
            admin.close()
        assert "dirs" in text
        sizes = _log_dir_sizes(b)
        assert sizes[("dirs", 0)] > 100 * 100 and sizes[("dirs", 1)] == 0


def _log_dir_sizes(b: Broker) -> dict[tuple[str, int], int]:
    from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
    from tests.support.rawclient import RawClient

    client = RawClient(b.bootstrap_servers)
    try:
        out = {}
        for version in (1, 4):
            resp = client.request(DescribeLogDirsRequest(topics=None), version)
            (result,) = resp.results
            assert (result.total_bytes > 0) == (version >= 4)
            out = {(t.name, p.partition_index): p.partition_size
                   for t in result.topics for p in t.partitions}
        return out
    finally:
        client.close()


def test_a_topic_config_set_to_its_default_is_reported_as_a_topic_config() -> None:
    """min.insync.replicas=1 equals the default, yet the topic sets it: source 1."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewTopic as KNewTopic

    with Broker() as b:
        admin = _admin(b)
        admin.create_topics([NewTopic("same", 1, 1, config={"min.insync.replicas": "1"}),
                             NewTopic("later", 1, 1)])["same"].result(10)
        res = ConfigResource(ConfigResource.Type.TOPIC, "later", incremental_configs=[
            ConfigEntry("retention.ms", "604800000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(10)
        entry = _describe(admin, "same")["min.insync.replicas"]
        assert (entry.value, entry.source, entry.is_default) == ("1", 1, False)
        entry = _describe(admin, "later")["retention.ms"]
        assert (entry.value, entry.source, entry.is_default) == ("604800000", 1, False)
        kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            kadmin.create_topics([KNewTopic("kp", 1, 1, topic_configs={"segment.bytes":
                                                                        "1073741824"})])
            got = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp")],
                                          include_synonyms=True)
        finally:
            kadmin.close()
        seg = got["topic"]["kp"]["segment.bytes"]
        assert seg["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert [(s["name"], s["source"]) for s in seg["synonyms"]] == [
            ("segment.bytes", "DYNAMIC_TOPIC_CONFIG"), ("log.segment.bytes", "DEFAULT_CONFIG")]

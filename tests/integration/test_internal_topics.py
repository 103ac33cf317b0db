"""Internal topics are protected for every client (issue 32).

Deleting ``__consumer_offsets`` or ``__transaction_state``, raising their
partition count, or a config change that lets their records be deleted used
to be accepted, and a restart then found every committed offset gone. Now the
broker refuses each, to confluent-kafka's AdminClient, kafka-python's admin
client and the CLI alike, with Kafka's error code and a message that says why;
the group's offsets survive; a broker started with
``odradek.allow.internal.topic.changes=true`` allows it (for a recovery).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from tests.support.process import ServerProcess

INTERNAL = ("__consumer_offsets", "__transaction_state")


def _commit(bootstrap: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "keepme"})
    c.commit(offsets=[TopicPartition("data", 0, offset)], asynchronous=False)
    c.close()


def _committed(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "keepme"})
    try:
        return int(c.committed([TopicPartition("data", 0)], 20)[0].offset)
    finally:
        c.close()


def _create_internal_topics(bootstrap: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "make-txn-state"})
    p.init_transactions(30)  # creates __transaction_state
    p.begin_transaction()
    p.produce("data", b"x")
    p.commit_transaction(30)
    _commit(bootstrap, 1)  # creates __consumer_offsets


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args, "--bootstrap-server",
                           bootstrap], capture_output=True, text=True, timeout=60)


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    b = ServerProcess(tmp_path / "data").start()
    yield b
    b.stop()


def test_every_client_is_refused_and_offsets_survive_a_restart(broker: ServerProcess) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewPartitions as KNewPartitions

    bootstrap = broker.bootstrap
    _create_internal_topics(bootstrap)
    _commit(bootstrap, 7)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for topic in INTERNAL:
            with pytest.raises(KafkaException, match="TOPIC_DELETION_DISABLED"):
                admin.delete_topics([topic])[topic].result(20)
            with pytest.raises(KafkaException, match=r"INVALID_PARTITIONS.*internal topic"):
                admin.create_partitions([NewPartitions(topic, 60)])[topic].result(20)
            for key, value in (("cleanup.policy", "delete"), ("retention.ms", "1000"),
                               ("cleanup.policy", "compact,delete")):
                res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
                    ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
                with pytest.raises(KafkaException, match=r"INVALID_CONFIG.*internal topic"):
                    admin.incremental_alter_configs([res])[res].result(20)
            res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
                ConfigEntry("cleanup.policy", None,
                            incremental_operation=AlterConfigOpType.DELETE)])
            with pytest.raises(KafkaException, match=r"INVALID_CONFIG.*internal topic"):
                admin.incremental_alter_configs([res])[res].result(20)
            # kafka-python: the same refusals, as its own error types.
            with pytest.raises(Exception, match="TopicDeletionDisabled"):
                kadmin.delete_topics([topic])
            with pytest.raises(Exception, match="InvalidPartitions"):
                kadmin.create_partitions({topic: KNewPartitions(60)})
            altered = str(kadmin.alter_configs([KConfigResource(
                ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": "delete"})]))
            assert "InvalidConfigurationError" in altered and "internal topic" in altered
            # The CLI: one line, non-zero, the reason.
            done = _cli(bootstrap, "topics", "delete", topic)
            assert done.returncode != 0 and "internal topic" in done.stderr, done
            assert "Traceback" not in done.stderr
            done = _cli(bootstrap, "topics", "alter", topic, "--partitions", "60")
            assert done.returncode != 0 and "internal topic" in done.stderr, done
        # An ordinary change of an internal topic is still fine.
        res = ConfigResource(ResourceType.TOPIC, "__consumer_offsets", incremental_configs=[
            ConfigEntry("segment.bytes", "52428800",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(20)
    finally:
        kadmin.close()
    broker.stop()
    broker.start()
    assert _committed(broker.bootstrap) == 7


def test_a_recovery_setting_allows_it(tmp_path: Path) -> None:
    b = ServerProcess(tmp_path / "data", "odradek.allow.internal.topic.changes=true").start()
    try:
        _create_internal_topics(b.bootstrap)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_topics(["__transaction_state"])["__transaction_state"].result(20)
        assert "__transaction_state" not in admin.list_topics(timeout=10).topics
    finally:
        b.stop()

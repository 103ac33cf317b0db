"""pytest plugin giving confluent-kafka-python's admin integration tests an
Odradek broker as their ``kafka_cluster``.

Upstream, ``tests/integration/conftest.py`` makes ``kafka_cluster`` (session
scope) from trivup (which downloads and starts Kafka) or, with ``BROKERS`` set,
from a bring-your-own bootstrap address; both give an object with
``admin()``, ``producer()``, ``consumer()``, ``create_topic()``,
``create_topic_and_wait_propogation()`` (sic), ``delete_topic()``,
``seed_topic()`` and ``client_conf()``. The runner does not take that conftest
(it imports trivup and the schema-registry stack): it runs the fetched test
files (.client-suites/confluent-kafka-python, `fetch --confluent-git`) with this plugin,
whose ``kafka_cluster`` starts ``odradek serve`` on PLAINTEXT with the ACL
settings of :mod:`tools.client_suites.security` when that feature is on (or,
on a cluster run, ``--cluster N``, an N-node cluster whose topics the fixture
creates at replication factor N at least).

Consumers are made as upstream's fixture makes them: through the suite's
``tests.common.TestUtils``, so ``TEST_CONSUMER_GROUP_PROTOCOL=consumer`` gives
them ``group.protocol=consumer`` (KIP-848) and drops the settings that
protocol forbids. ``sasl_cluster`` (trivup's SASL PLAIN cluster, one test)
is not provided: the test is skipped, saying so.

The suite pins its broker version in ``TestUtils.broker_version()`` (4.2.0,
for its share-group tests), where the other suites read ``KAFKA_VERSION``; the
tests whose own ``skipif`` compares that version (:data:`SINCE_KAFKA`) are
skipped here as the suite skips them on a broker older than they need, when
``KAFKA_VERSION`` (the runner's ``--kafka-version``, 4.0.0 by default: the
version Odradek follows) is older.

Loaded by the runner as ``-p tools.client_suites.confluent_plugin``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, DeserializingConsumer, Producer, SerializingProducer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tools.client_suites.broker import OdradekServer
from tools.client_suites.cluster import OdradekClusterServer, cluster_size, make_server, topic_ready


def _group_protocol(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` as the suite's own consumers adjust it for
    ``TEST_CONSUMER_GROUP_PROTOCOL`` (tests/common's ``TestUtils``)."""
    from tests.common import TestUtils  # type: ignore[import-not-found]  # the suite's

    TestUtils.update_conf_group_protocol(conf)
    TestUtils.remove_forbidden_conf_group_protocol_consumer(conf)
    return conf


SINCE_KAFKA = {
    "tests/integration/admin/test_incremental_alter_configs.py::test_incremental_alter_configs":
        ((4, 1), "KIP-966 ELR's cluster-level min.insync.replicas record"),
}
"""Node id → (the Kafka version its own skipif asks for, what it needs)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    version = tuple(int(x) for x in os.environ.get("KAFKA_VERSION", "4.0.0").split(".")[:2])
    for item in items:
        since = SINCE_KAFKA.get(item.nodeid.split("[")[0])
        if since and version < since[0]:
            item.add_marker(pytest.mark.skip(
                reason=f"the suite's skipif: needs Kafka {'.'.join(map(str, since[0]))}+ "
                       f"({since[1]}); KAFKA_VERSION is older"))


class OdradekCluster:
    """One Odradek broker, in the shape of the suite's cluster fixture."""

    def __init__(self, server: OdradekServer | OdradekClusterServer) -> None:
        self.server = server
        self._admin: AdminClient | None = None
        self._producer: SerializingProducer | None = None

    def client_conf(self, conf: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"bootstrap.servers": self.server.bootstrap}
        out.update(conf or {})
        return out

    def admin(self, conf: dict[str, Any] | None = None) -> AdminClient:
        if conf:
            return AdminClient(self.client_conf(conf))
        if self._admin is None:
            self._admin = AdminClient(self.client_conf())
        return self._admin

    def cimpl_producer(self, conf: dict[str, Any] | None = None) -> Producer:
        return Producer(self.client_conf(conf))

    def producer(self, conf: dict[str, Any] | None = None, key_serializer: Any = None,
                 value_serializer: Any = None) -> SerializingProducer:
        settings = self.client_conf(conf)
        if key_serializer is not None:
            settings["key.serializer"] = key_serializer
        if value_serializer is not None:
            settings["value.serializer"] = value_serializer
        return SerializingProducer(settings)

    def cimpl_consumer(self, conf: dict[str, Any] | None = None) -> Consumer:
        """A plain consumer (upstream's ``TestConsumer``: incremental assign under
        the consumer protocol)."""
        from tests.common import TestConsumer

        settings = self.client_conf({"group.id": str(uuid.uuid1()),
                                     "auto.offset.reset": "earliest"})
        settings.update(conf or {})
        consumer: Consumer = TestConsumer(settings)
        return consumer

    def consumer(self, conf: dict[str, Any] | None = None, key_deserializer: Any = None,
                 value_deserializer: Any = None) -> DeserializingConsumer:
        settings = self.client_conf({"group.id": str(uuid.uuid1()),
                                     "auto.offset.reset": "earliest"})
        settings.update(conf or {})
        if key_deserializer is not None:
            settings["key.deserializer"] = key_deserializer
        if value_deserializer is not None:
            settings["value.deserializer"] = value_deserializer
        return DeserializingConsumer(_group_protocol(settings))

    def create_topic(self, prefix: str, conf: dict[str, Any] | None = None,
                     **create_kwargs: Any) -> str:
        """A new topic ``<prefix>-<uuid>`` (one partition unless ``conf`` says).

        Its replication factor is at least the cluster's size: the suite's
        tests ask for 1 (its single trivup broker), which under the cluster's
        ``min.insync.replicas=2`` would refuse every ``acks=all`` produce
        (NOT_ENOUGH_REPLICAS, as Kafka does)."""
        name = f"{prefix}-{uuid.uuid1()}"
        settings = {"num_partitions": 1, "replication_factor": 1, **(conf or {})}
        settings["replication_factor"] = max(int(settings["replication_factor"]), cluster_size())
        futures = self.admin().create_topics([NewTopic(name, **settings)], **create_kwargs)
        futures[name].result()
        return name

    def create_topic_and_wait_propogation(self, prefix: str, conf: dict[str, Any] | None = None,
                                          **create_kwargs: Any) -> str:
        """:meth:`create_topic`, then wait (30 s at most) until every broker
        lists the topic with a leader for each partition (unless only
        validated)."""
        name = self.create_topic(prefix, conf, **create_kwargs)
        if create_kwargs.get("validate_only"):
            return name
        ports = self.server.ports if isinstance(self.server, OdradekClusterServer) \
            else [self.server.port]
        deadline = time.monotonic() + 30
        while not topic_ready(ports, name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not in every broker's metadata after 30 s")
            time.sleep(0.1)
        return name

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``; a failure is printed, not raised (as upstream's)."""
        try:
            self.admin().delete_topics([topic])[topic].result()
        except Exception as exc:  # upstream's fixture only reports it
            print(f"Failed to delete topic {topic}: {exc}")

    def seed_topic(self, topic: str, value_source: Iterable[Any] | None = None,
                   key_source: Iterable[Any] | None = None,
                   header_source: Iterable[Any] | None = None) -> None:
        """Produce each value (keys and headers reused in turn), then flush."""
        if self._producer is None:
            self._producer = self.producer({"linger.ms": 500})
        values = list(value_source) if value_source is not None else \
            [f"test-data{i}" for i in range(100)]
        keys = list(key_source) if key_source is not None else [None]
        headers = list(header_source) if header_source is not None else [None]
        for i, value in enumerate(values):
            self._producer.produce(topic, value=value, key=keys[i % len(keys)],
                                   headers=headers[i % len(headers)])
        self._producer.flush()

    def stop(self) -> None:
        self._admin = None
        self._producer = None
        self.server.stop()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[OdradekCluster]:
    folder = Path(tempfile.mkdtemp(prefix="odradek-suite-"))
    server = make_server(folder / "broker", "PLAINTEXT", partitions=1)
    server.start()
    cluster = OdradekCluster(server)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def sasl_cluster() -> None:
    pytest.skip("sasl_cluster is trivup's SASL PLAIN cluster with its own broker settings; "
                "the runner does not provide it")

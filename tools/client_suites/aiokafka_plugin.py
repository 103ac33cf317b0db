"""pytest plugin pointing aiokafka's own integration tests at Odradek.

Upstream, ``tests/conftest.py`` starts Kafka in a docker container of
aiokafka's own image (``--docker-image aiolibs/kafka:SCALA_KAFKA``) as the
session fixture ``kafka_server``, and the class fixture ``setup_test_class``
hands each ``KafkaIntegrationTestCase`` its address, SSL and SASL ports, the
certificates (``ssl_folder``, made by the image's ``gen-ssl-certs.sh``) and
three helpers that run the image's JVM tools (``acl_manager``:
``kafka-acls.sh``; ``kafka_config``: ``kafka-configs.sh``; ``kerberos_utils``:
a KDC in the container).

This plugin keeps that conftest (its event loop, garbage collection and port
fixtures) and swaps, as the conftest module is registered and before pytest
reads its fixtures, the ones that need docker:

* ``kafka_server``: ``odradek serve`` (or the runner's cluster,
  :mod:`tools.client_suites.cluster`) on PLAINTEXT, with the image's
  ``NUM_PARTITIONS=2`` and, on one node, its ``broker.id`` 0 as ``node.id``
  (``test_sender`` sends to node 0 by id); ``kafka_image`` and ``docker``
  are not used.
* ``setup_test_class``: the same class attributes as upstream; the Kafka
  version the ``kafka_versions`` markers compare with is ``KAFKA_VERSION``
  (the runner's ``--kafka-version``, 4.0.0 by default), where upstream reads
  it from the image's tag.
* ``ssl_folder``, ``acl_manager``, ``kafka_config``, ``kerberos_utils``:
  skip the test that asks for them, saying why (the image's certificates,
  JVM tools and KDC).

Only the tests that use ``kafka_server`` (directly or through
``setup_test_class``) are run: the others are aiokafka's unit tests. The
SSL tests (they connect to the image's SSL port) and ``tests/test_sasl.py``
(GSSAPI, PLAIN and SCRAM listeners of the image, users made with its JVM
tools) are skipped, saying so.

Loaded by the runner as ``-p tools.client_suites.aiokafka_plugin``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tools.client_suites.broker import OdradekServer
from tools.client_suites.cluster import OdradekClusterServer, make_server

NEEDS_IMAGE = {
    "tests/test_sasl.py": "aiokafka's docker image's SASL listeners (GSSAPI with its KDC, "
                          "PLAIN, SCRAM users made with kafka-configs.sh)",
    "tests/test_consumer.py::TestConsumerIntegration::test_ssl_consume":
        "the docker image's SSL listener and gen-ssl-certs.sh certificates",
    "tests/test_producer.py::TestKafkaProducerIntegration::test_producer_ssl":
        "the docker image's SSL listener and gen-ssl-certs.sh certificates",
}
"""Node id (or file) → what of upstream's docker image the test needs."""


@dataclass
class OdradekKafkaServer:
    """Upstream's ``KafkaServer`` record, for an Odradek broker or cluster."""

    host: str
    port: int
    server: OdradekServer | OdradekClusterServer
    ssl_port: int = 0
    sasl_plain_port: int = 0
    sasl_ssl_port: int = 0
    container: Any = None
    ports: list[int] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{p}" for p in self.ports or [self.port]]


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[OdradekKafkaServer]:
    folder = Path(tempfile.mkdtemp(prefix="odradek-suite-"))
    server = make_server(folder / "broker", "PLAINTEXT", partitions=2, single={"node.id": "0"})
    server.start()
    ports = server.ports if isinstance(server, OdradekClusterServer) else [server.port]
    try:
        yield OdradekKafkaServer("127.0.0.1", ports[0], server, ports=ports)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _needs_image(what: str) -> Any:
    @pytest.fixture(scope="class")
    def fixture() -> None:
        pytest.skip(f"needs {what} (the runner starts Odradek, not the image)")

    return fixture


ssl_folder = _needs_image("the docker image's gen-ssl-certs.sh certificates")
acl_manager = _needs_image("kafka-acls.sh in the docker image")
kafka_config = _needs_image("kafka-configs.sh in the docker image")
kerberos_utils = _needs_image("the docker image's KDC")


@pytest.fixture(scope="class")
def setup_test_class(request: pytest.FixtureRequest, loop: Any,
                     kafka_server: OdradekKafkaServer) -> None:
    cls = request.cls
    cls.loop = loop
    cls.kafka_host = kafka_server.host
    cls.kafka_port = kafka_server.port
    cls.kafka_ssl_port = kafka_server.ssl_port
    cls.kafka_sasl_plain_port = kafka_server.sasl_plain_port
    cls.kafka_sasl_ssl_port = kafka_server.sasl_ssl_port
    cls.hosts = kafka_server.hosts
    cls.kafka_version = os.environ.get("KAFKA_VERSION", "4.0.0")


REPLACED = {"kafka_server": kafka_server, "setup_test_class": setup_test_class,
            "ssl_folder": ssl_folder, "acl_manager": acl_manager,
            "kafka_config": kafka_config, "kerberos_utils": kerberos_utils}


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: object) -> None:
    """Swap the docker fixtures of aiokafka's ``tests/conftest.py`` before
    pytest reads the module's fixtures."""
    if getattr(plugin, "__name__", "") == "tests.conftest" and hasattr(plugin, "kafka_server"):
        for name, fixture in REPLACED.items():
            setattr(plugin, name, fixture)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests that use ``kafka_server``; skip those needing the image."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if "kafka_server" in getattr(item, "fixturenames", ()) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    for item in items:
        base = item.nodeid.split("[")[0]
        what = NEEDS_IMAGE.get(base) or NEEDS_IMAGE.get(base.split("::")[0])
        if what:
            item.add_marker(pytest.mark.skip(reason=f"needs {what}"))

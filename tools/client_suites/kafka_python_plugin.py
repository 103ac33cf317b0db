"""pytest plugin pointing kafka-python's own integration suite at Odradek.

kafka-python's ``test/integration/conftest.py`` gets every broker from
``test.integration.fixtures.KafkaFixture.instance(node_id, transport=...,
sasl_mechanism=..., partitions=..., tmp_dir=...)``, which downloads nothing
but expects a Kafka distribution under ``servers/<version>/`` and starts it
with ``kafka-run-class.sh``. (Its other route, ``KAFKA_URI`` for an external
broker, makes the SASL tests skip themselves and ignores the transport.)
This plugin replaces that one class method, before any test runs, with one
that starts ``odradek serve`` (:class:`tools.client_suites.broker.OdradekServer`)
with the same transport, mechanism, login and partition count, and returns
an object answering the fixture's interface as the suites use it:
``host``, ``port``, ``transport``, ``sasl_mechanism``, ``broker_user``,
``broker_password``, ``partitions``, ``replicas``, ``ssl_dir``,
``bootstrap_server()``, ``_enrich_client_params()``, ``get_topic_names()``,
``start()``, ``stop()``, ``close()``, ``child.dump_logs()``, ``zookeeper``.

A transport whose security feature is switched off
(:mod:`tools.client_suites.security`) skips the test, saying so. On a
cluster run (``--cluster N``, :mod:`tools.client_suites.cluster`) the broker
is an N-node cluster, ``replicas`` (the replication factor the suite's
``create_topics`` uses) is N, and a transport other than PLAINTEXT is
skipped, saying so.

Loaded by the runner as ``-p tools.client_suites.kafka_python_plugin``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tools.client_suites.broker import OdradekServer, features_from_env, missing_features
from tools.client_suites.cluster import OdradekClusterServer, cluster_size, make_server
from tools.client_suites.security import Login


class _Child:
    """What the suites call on ``fixture.child``."""

    def __init__(self, server: OdradekServer | OdradekClusterServer) -> None:
        self.server = server

    def dump_logs(self) -> None:
        print(self.server.log_tail())


class OdradekKafkaFixture:
    """An Odradek broker in the shape of kafka-python's ``KafkaFixture``."""

    broker_user = Login().user
    broker_password = Login().password

    def __init__(self, node_id: int = 0, *, transport: str = "PLAINTEXT",
                 sasl_mechanism: str | None = None, partitions: int = 4, replicas: int = 1,
                 tmp_dir: Any = None, **_ignored: Any) -> None:
        self.broker_id = node_id
        self.host = "localhost"
        self.transport = transport.upper()
        self.sasl_mechanism = sasl_mechanism.upper() if sasl_mechanism else None
        self.partitions = partitions
        self.replicas = max(replicas, cluster_size())
        self.zookeeper = None
        self.kafka_version = os.environ.get("KAFKA_VERSION", "")
        self._own_dir = tmp_dir is None
        self.folder = Path(tempfile.mkdtemp(prefix="odradek-suite-")) if tmp_dir is None \
            else Path(str(tmp_dir))
        self.server = make_server(self.folder / "broker", self.transport,
                                  mechanism=self.sasl_mechanism, partitions=partitions)
        self.child = _Child(self.server)
        self.running = False
        self.ssl_dir: str | None = str(self.server.certs) if self.ssl_enabled else None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def sasl_enabled(self) -> bool:
        return self.transport in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def ssl_enabled(self) -> bool:
        return self.transport in ("SSL", "SASL_SSL")

    def open(self) -> None:
        self.start()

    def start(self) -> None:
        if not self.running:
            self.server.start()
            self.running = True

    def stop(self) -> None:
        self.server.stop()
        self.running = False

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.folder, ignore_errors=True)

    def dump_logs(self) -> None:
        self.child.dump_logs()

    def bootstrap_server(self) -> str:
        return self.server.bootstrap

    def _enrich_client_params(self, params: dict[str, Any], **defaults: Any) -> dict[str, Any]:
        """Connection settings for a kafka-python client of this broker: the given
        ``params``, then ``defaults``, then this broker's address and security."""
        out = {**defaults, **params}
        out.setdefault("bootstrap_servers", self.bootstrap_server())
        out.setdefault("security_protocol", self.transport)
        if self.sasl_enabled:
            out.setdefault("sasl_mechanism", self.sasl_mechanism)
            out.setdefault("sasl_plain_username", self.broker_user)
            out.setdefault("sasl_plain_password", self.broker_password)
        if self.ssl_enabled:
            assert self.ssl_dir is not None
            out.setdefault("ssl_cafile", os.path.join(self.ssl_dir, "ca-cert"))
            out.setdefault("ssl_check_hostname", False)
        return out

    def get_topic_names(self) -> list[str]:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(**self._enrich_client_params({}, client_id="topic_lister"))
        try:
            return list(admin.list_topics())
        finally:
            admin.close()


def _instance(cls: type, /, node_id: int = 0, **params: Any) -> OdradekKafkaFixture:
    transport = str(params.get("transport", "PLAINTEXT")).upper()
    missing = missing_features(transport, features_from_env())
    if missing:
        pytest.skip(f"{transport} needs {', '.join(missing)}, off in "
                    "tools/client_suites/security.py (switch it on when it lands)")
    if cluster_size() > 1 and transport != "PLAINTEXT":
        pytest.skip(f"{transport}: the runner builds clusters with PLAINTEXT listeners only")
    params.pop("external", None)
    fixture = OdradekKafkaFixture(node_id, **params)
    try:
        fixture.open()
    except BaseException:
        fixture.close()
        raise
    return fixture


def pytest_configure(config: pytest.Config) -> None:
    from test.integration import fixtures  # type: ignore[import-not-found]  # kafka-python's

    fixtures.KafkaFixture.instance = classmethod(_instance)

"""A worker on a SASL_SSL broker, configured with Kafka's Java client names
(``sasl.jaas.config``, a PEM ``ssl.truststore.location``): FileStream source
to sink through it."""

from __future__ import annotations

from pathlib import Path

from odradek.connect.runtime.worker import StandaloneWorker
from odradek.testing.broker import ADMIN_PASSWORD, Broker
from tests.integration.connect.support import call, running, wait_for, worker_props


def test_round_trip_over_sasl_ssl(tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("secret one\nsecret two ✓\n", encoding="utf-8")
    with Broker(ssl=True, sasl=True) as broker:
        assert broker.certs is not None
        ca = broker.client_config()["ssl.ca.location"]
        props = {**worker_props(broker.bootstrap_servers, tmp_path),
                 "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                 "ssl.truststore.location": ca, "ssl.truststore.type": "PEM",
                 "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                     f'required username="admin" password="{ADMIN_PASSWORD}";'}
        worker = StandaloneWorker(props, [
            {"name": "src", "connector.class": "FileStreamSource", "file": str(source),
             "topic": "secure"},
            {"name": "snk", "connector.class": "FileStreamSink", "file": str(sink),
             "topics": "secure"}])
        url = worker.start_in_thread()
        try:
            wait_for("both running", lambda: running(url, "src") and running(url, "snk"))
            wait_for("the sink file", lambda: sink.exists()
                     and sink.read_bytes() == source.read_bytes())
            assert call("GET", url + "/")[1]["kafka_cluster_id"]
        finally:
            worker.stop_thread()

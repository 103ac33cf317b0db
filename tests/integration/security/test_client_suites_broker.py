"""The client-suite runner's broker: ``odradek serve`` in its own process with
the PLAINTEXT table, a real client on its listener, stopped cleanly."""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient

from tools.client_suites.broker import OdradekServer, api_versions_answered


def test_the_suite_broker_serves_both_listeners_and_stops(tmp_path: Path) -> None:
    server = OdradekServer(tmp_path / "broker", "PLAINTEXT", partitions=3, features=set())
    server.start()
    try:
        assert api_versions_answered(server.port) and api_versions_answered(server.setup_port)
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            admin.create_topics({"t": {"num_partitions": 3, "replication_factor": 1}})
            assert "t" in admin.list_topics()
        finally:
            admin.close()
        written = (tmp_path / "broker" / "server.properties").read_text()
        assert "num.partitions=3" in written and "SETUP://127.0.0.1:" in written
    finally:
        server.stop()
    assert not api_versions_answered(server.port, timeout_s=0.5)

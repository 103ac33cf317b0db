"""Dynamic keystore replacement (IncrementalAlterConfigs on this broker's resource)
and the CLI's ``--command-config`` over SSL."""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from odradek.testing.broker import Broker
from odradek.testing.certs import PASSWORD, issue, new_ca

API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 7, 0)  # size, key, version, corr, no client id


def _handshake(port: int, cafile: str) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=cafile)
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def _api_versions(sock: ssl.SSLSocket) -> int:
    """Send ApiVersions v0; the correlation id of the answer."""
    sock.sendall(API_VERSIONS_V0)
    head = b""
    while len(head) < 8:
        chunk = sock.recv(8 - len(head))
        assert chunk, "connection closed"
        head += chunk
    size, corr = struct.unpack(">ii", head)
    remaining = size - 4
    while remaining:
        remaining -= len(sock.recv(remaining))
    return int(corr)


def test_dynamic_keystore_replaces_the_certificate(tmp_path: Path) -> None:
    with Broker(ssl=True, **{"ssl.keystore.type": "PEM"}) as broker:
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        old = _handshake(port, broker.ssl_ca)  # a connection from before the change
        ca = new_ca("CN=New CA")
        cert = issue(ca, "CN=localhost,O=New", ("localhost", "127.0.0.1"))
        keystore = tmp_path / "new-keystore.pem"
        keystore.write_bytes(cert.key_pem + cert.cert_pem + ca.cert_pem)
        new_ca_file = tmp_path / "new-ca.pem"
        new_ca_file.write_bytes(ca.cert_pem)
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(port, str(new_ca_file))

        admin = AdminClient(broker.client_config())
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
            "listener.name.ssl.ssl.keystore.location", str(keystore),
            incremental_operation=AlterConfigOpType.SET)])
        for fut in admin.incremental_alter_configs([resource]).values():
            fut.result(timeout=10)

        deadline = time.monotonic() + 15
        while True:  # applied once the config record is replayed
            try:
                fresh = _handshake(port, str(new_ca_file))
                break
            except ssl.SSLCertVerificationError:
                assert time.monotonic() < deadline, "the new certificate was never served"
                time.sleep(0.05)
        assert _api_versions(fresh) == 7
        fresh.close()
        # A client trusting only the new CA works end to end.
        only_new = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                                "security.protocol": "SSL", "ssl.ca.location": str(new_ca_file)})
        assert only_new.list_topics(timeout=10).brokers
        # The connection from before keeps its certificate and is served.
        assert _api_versions(old) == 7
        old.close()
        # Clients trusting only the old CA are refused now.
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(port, broker.ssl_ca)


def test_a_keystore_that_does_not_load_keeps_the_old_one(tmp_path: Path) -> None:
    with Broker(ssl=True) as broker:
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        admin = AdminClient(broker.client_config())
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
            "ssl.keystore.location", str(tmp_path / "missing.pem"),
            incremental_operation=AlterConfigOpType.SET)])
        for fut in admin.incremental_alter_configs([resource]).values():
            fut.result(timeout=10)
        server = broker.app.server
        state = broker.app.state
        assert server is not None and state is not None
        deadline = time.monotonic() + 10
        while state.config.get("ssl.keystore.location") != str(tmp_path / "missing.pem"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sock = _handshake(port, broker.ssl_ca)
        assert _api_versions(sock) == 7
        sock.close()


def test_keystore_password_is_sensitive_in_describe_configs() -> None:
    with Broker(ssl=True, **{"ssl.keystore.password": "hidden-value"}) as broker:
        admin = AdminClient(broker.client_config())
        resource = ConfigResource(ResourceType.BROKER, "1")
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        entry = configs["ssl.keystore.password"]
        assert entry.is_sensitive and entry.value is None


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_with_command_config_over_ssl(tmp_path: Path) -> None:
    with Broker(ssl=True, **{"ssl.client.auth": "required"}) as broker:
        certs = broker.certs
        assert certs is not None
        config = tmp_path / "client.properties"
        config.write_text("# Kafka client properties\n" + "".join(
            f"{k}={v}\n" for k, v in certs.java_client_properties().items()))
        bs = ["--bootstrap-server", broker.bootstrap_servers, "--command-config", str(config)]
        made = _cli("topics", "create", "viacli", "--partitions", "2", *bs)
        assert made.returncode == 0, made.stderr
        listed = _cli("topics", "list", "--json", *bs)
        assert listed.returncode == 0, listed.stderr
        assert "viacli" in json.loads(listed.stdout)
        produced = subprocess.run(
            [sys.executable, "-m", "odradek", "produce", "viacli", *bs], input="a\nb\nc\n",
            capture_output=True, text=True, timeout=60)
        assert produced.returncode == 0, produced.stderr
        consumed = _cli("consume", "viacli", "--from-beginning", "--max-messages", "3",
                        "--timeout-ms", "10000", *bs)
        assert consumed.returncode == 0, consumed.stderr
        assert sorted(consumed.stdout.split()) == ["a", "b", "c"]

        # Without the settings, or with bad ones: one line, non-zero exit.
        plain = _cli("topics", "list", "--bootstrap-server", broker.bootstrap_servers)
        assert plain.returncode != 0 and len(plain.stderr.strip().splitlines()) == 1
        bad = tmp_path / "bad.properties"
        bad.write_text("security.protocol=SSL\nssl.keystore.location=/nonexistent.p12\n"
                       f"ssl.keystore.password={PASSWORD}\n")
        failed = _cli("topics", "list", "--bootstrap-server", broker.bootstrap_servers,
                      "--command-config", str(bad))
        assert failed.returncode != 0
        assert failed.stderr.strip().splitlines() == [failed.stderr.strip()]
        assert "ssl.keystore.location" in failed.stderr
        missing = _cli("topics", "list", "--bootstrap-server", broker.bootstrap_servers,
                       "--command-config", str(tmp_path / "nope.properties"))
        assert missing.returncode != 0 and "nope.properties" in missing.stderr

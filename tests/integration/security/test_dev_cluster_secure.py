"""``odradek dev cluster --secure``: SASL_SSL and ACLs in one command; the
admin's ``--command-config`` file works with the CLI and a client without
credentials is refused."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from odradek.testing.cluster import free_port


def _free_pair() -> int:
    while True:
        base = free_port()
        try:
            for p in (base, base + 1, base + 2):  # client, quorum, metrics
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=90)


def test_a_secure_dev_cluster_needs_credentials_and_acls(tmp_path: Path) -> None:
    base = _free_pair()
    directory = tmp_path / "dev"
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "dev", "cluster", "--nodes", "1", "--secure",
         "--dir", str(directory), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        bootstrap = ""
        while not bootstrap:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            if line.startswith("bootstrap: "):
                bootstrap = line.split(": ", 1)[1].strip()
        assert bootstrap == f"localhost:{base}"
        admin = str(directory / "admin.properties")
        created = subprocess.CompletedProcess[str]([], 1, "", "")
        for _ in range(60):  # the node may still be electing itself
            created = odradek("topics", "create", "guarded", "--partitions", "1",
                              "--bootstrap-server", bootstrap, "--command-config", admin)
            if created.returncode == 0:
                break
        assert created.returncode == 0, created.stderr
        # Without credentials: one line, non-zero, no traceback.
        refused = odradek("topics", "list", "--bootstrap-server", bootstrap)
        assert refused.returncode != 0
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        # A SCRAM user the admin makes, with no ACL yet, is authenticated and refused.
        secret = tmp_path / "carol.password"
        secret.write_text("carol-secret\n")
        made = odradek("users", "add", "carol", "--password-file", str(secret),
                       "--mechanism", "SCRAM-SHA-512", "--bootstrap-server", bootstrap,
                       "--command-config", admin)
        assert made.returncode == 0, made.stderr
        errors: list[KafkaError | None] = []
        producer = Producer({
            "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
            "sasl.password": "carol-secret",
            "ssl.ca.location": str(directory / "certs" / "ca.pem"),
            "message.timeout.ms": 20000})
        producer.produce("guarded", b"x", on_delivery=lambda err, _m: errors.append(err))
        producer.flush(30)
        assert len(errors) == 1 and errors[0] is not None
        assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:  # a failed assertion: stop the nodes with it
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

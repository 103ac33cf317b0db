"""SCRAM credentials as cluster metadata: confluent-kafka's AdminClient alters
and describes them (as confluent-kafka-python's test_user_scram_credentials
does), they survive a restart, ``odradek users`` and ``storage format
--add-scram`` create them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.client.connection import ClientError, Connection, KafkaError
from odradek.client.security import ClientSecurity
from odradek.testing.broker import Broker
from odradek.wire.messages.metadata_request import MetadataRequest
from tests.integration.security.sasl_support import sasl_props


def _conf(broker: Broker, mech: str = "PLAIN", user: str = "admin",
          password: str = "admin-secret") -> dict[str, Any]:
    return {"bootstrap.servers": _address(broker, 0), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password}


def _address(broker: Broker, index: int) -> str:
    server = broker.app.server
    assert server is not None
    return f"127.0.0.1:{server.bound_ports()[index]}"


def _can_produce(broker: Broker, mech: str, user: str, password: str) -> bool:
    """Authenticate with ``mech`` as ``user`` on the SASL listener (this package's
    client, not librdkafka: a refused producer's retries would outlive the test)."""
    security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism=mech, sasl_username=user,
                              sasl_password=password)

    async def run() -> bool:
        try:
            conn = await Connection.open(_address(broker, 0), security=security)
        except (ClientError, KafkaError):
            return False
        try:
            return bool((await conn.request(MetadataRequest(topics=None), 12)).brokers)
        finally:
            await conn.close()

    return asyncio.run(run())


def test_admin_client_alters_and_describes(tmp_path: Path) -> None:
    with Broker(**sasl_props()) as broker:
        admin = AdminClient(_conf(broker))
        # a missing user: RESOURCE_NOT_FOUND
        futures = admin.describe_user_scram_credentials(["sam"])
        with pytest.raises(KafkaException) as info:
            futures["sam"].result(timeout=20)
        assert info.value.args[0].name() == "RESOURCE_NOT_FOUND"
        # upsert, one mechanism per request
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            up = UserScramCredentialUpsertion("sam", ScramCredentialInfo(mech, 10000),
                                              b"sam-secret", b"salt")
            for fut in admin.alter_user_scram_credentials([up]).values():
                assert fut.result(timeout=20) is None
        described = admin.describe_user_scram_credentials(["sam"])["sam"].result(timeout=20)
        infos = sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos)
        assert infos == [(ScramMechanism.SCRAM_SHA_256, 10000),
                         (ScramMechanism.SCRAM_SHA_512, 10000)]
        assert _can_produce(broker, "SCRAM-SHA-512", "sam", "sam-secret")
        assert not _can_produce(broker, "SCRAM-SHA-512", "sam", "wrong")
        # describe all (this client sends null Users for None)
        everyone = admin.describe_user_scram_credentials(None).result(timeout=20)
        assert set(everyone) == {"sam"}
        # too few iterations: UNACCEPTABLE_CREDENTIAL
        bad = UserScramCredentialUpsertion(
            "ann", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x", b"salt")
        with pytest.raises(KafkaException) as info:
            admin.alter_user_scram_credentials([bad])["ann"].result(timeout=20)
        assert info.value.args[0].name() == "UNACCEPTABLE_CREDENTIAL"
        # delete both; deleting again: RESOURCE_NOT_FOUND
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            dele = UserScramCredentialDeletion("sam", mech)
            assert admin.alter_user_scram_credentials([dele])["sam"].result(timeout=20) is None
        dele = UserScramCredentialDeletion("sam", ScramMechanism.SCRAM_SHA_256)
        with pytest.raises(KafkaException) as info:
            admin.alter_user_scram_credentials([dele])["sam"].result(timeout=20)
        assert info.value.args[0].name() == "RESOURCE_NOT_FOUND"
        assert admin.describe_user_scram_credentials(None).result(timeout=20) == {}
        assert not _can_produce(broker, "SCRAM-SHA-512", "sam", "sam-secret")


def _odradek(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_users_cli_and_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # a PLAINTEXT listener next to the SASL one, for the CLI (no --command-config yet)
    props = sasl_props(**{
        "listeners": "SASL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT"})
    with Broker(data_dir=str(data), **props) as broker:
        plaintext = _address(broker, 1)
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            proc = _odradek("users", "add", "carol", "--password", "carol-secret",
                            "--mechanism", mech, "--iterations", "8192",
                            "--bootstrap-server", plaintext)
            assert proc.returncode == 0, proc.stderr
        proc = _odradek("users", "list", "--bootstrap-server", plaintext)
        assert proc.returncode == 0, proc.stderr
        lines = [ln.split() for ln in proc.stdout.splitlines()[1:]]
        assert ["carol", "SCRAM-SHA-256", "8192"] in lines
        assert ["carol", "SCRAM-SHA-512", "8192"] in lines
    with Broker(data_dir=str(data), **props) as broker:  # the same data: a restart
        assert _can_produce(broker, "SCRAM-SHA-256", "carol", "carol-secret")
        plaintext = _address(broker, 1)
        proc = _odradek("users", "remove", "carol", "--bootstrap-server", plaintext)
        assert proc.returncode == 0, proc.stderr
        assert "SCRAM-SHA-256, SCRAM-SHA-512" in proc.stdout
        assert not _can_produce(broker, "SCRAM-SHA-256", "carol", "carol-secret")


def test_storage_format_add_scram(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(f"node.id=1\nlog.dirs={data}\n")
    cluster_id = _odradek("storage", "random-uuid").stdout.strip()
    proc = _odradek("storage", "format", "-t", cluster_id, "-c", str(props),
                    "--add-scram", "SCRAM-SHA-256=[name=dave,password=dave-secret]",
                    "--add-scram", 'SCRAM-SHA-512=[name=dave,password="dave-secret",'
                                   'iterations=8192]')
    assert proc.returncode == 0, proc.stderr
    assert (data / "bootstrap.checkpoint").exists()
    bad = _odradek("storage", "format", "-t", cluster_id, "-c", str(props), "-g",
                   "--add-scram", "SCRAM-SHA-1=[name=x,password=y]")
    assert bad.returncode == 1 and "unknown mechanism" in bad.stderr
    for _ in range(2):  # the records are written once, with the first start's
        with Broker(data_dir=str(data), **sasl_props()) as broker:
            assert _can_produce(broker, "SCRAM-SHA-256", "dave", "dave-secret")
            assert _can_produce(broker, "SCRAM-SHA-512", "dave", "dave-secret")
            admin = AdminClient(_conf(broker))
            users = admin.describe_user_scram_credentials(None).result(timeout=20)
            assert sorted(i.iterations for i in users["dave"].scram_credential_infos) == [
                4096, 8192]

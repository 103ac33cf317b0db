"""SCRAM credentials in a 3-node cluster: --add-scram users are written once
by the first active controller, AlterUserScramCredentials sent to any node is
decided by the controller (forwarded), and every node's image has them."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from odradek.client.client import KafkaClient
from odradek.wire import scram
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from odradek.wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from tests.support.cluster import LocalCluster, assert_no_tracebacks, serve_command, wait_for

pytestmark = pytest.mark.timeout(240)


def _users(address: str) -> dict[str, list[tuple[int, int]]]:
    async def run() -> dict[str, list[tuple[int, int]]]:
        client = await KafkaClient.connect(address)
        try:
            resp = await client.request(DescribeUserScramCredentialsRequest(users=None), 0)
            return {r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
                    for r in resp.results}
        finally:
            await client.close()

    return asyncio.run(run())


def _alter(address: str, name: str, iterations: int) -> int:
    async def run() -> int:
        client = await KafkaClient.connect(address)
        try:
            salted = scram.salted_password("sha256", "pw", b"salt", iterations)
            resp = await client.request(AlterUserScramCredentialsRequest(upsertions=[
                ScramCredentialUpsertion(name, 1, iterations, b"salt", salted)]), 0)
            return int(resp.results[0].error_code)
        finally:
            await client.close()

    return asyncio.run(run())


def test_scram_users_reach_every_node(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3)
    odradek = [*serve_command()[:-1]]
    cluster_id = subprocess.run([*odradek, "storage", "random-uuid"], check=True,
                                capture_output=True, text=True).stdout.strip()
    for node in cluster.nodes.values():
        subprocess.run([*odradek, "storage", "format", "-t", cluster_id, "-c",
                        str(node.properties), "--add-scram",
                        "SCRAM-SHA-512=[name=boot,password=boot-secret,iterations=5000]"],
                       check=True, capture_output=True)
    cluster.start()
    try:
        nodes = [n.address for n in cluster.nodes.values()]

        def everyone_has(name: str, expected: list[tuple[int, int]]) -> bool:
            try:
                return all(_users(a).get(name) == expected for a in nodes)
            except Exception:  # a node still starting, or no controller yet
                return False

        wait_for("the bootstrap user on every node",
                 lambda: everyone_has("boot", [(2, 5000)]), 90)
        for i, address in enumerate(nodes):  # at least two of them forward
            wait_for(f"an answer from node {i + 1}",
                     lambda a=address, i=i: _alter(a, f"u{i}", 4096 + i) == 0, 60)
        for i in range(len(nodes)):
            wait_for(f"u{i} on every node",
                     lambda i=i: everyone_has(f"u{i}", [(1, 4096 + i)]), 60)
        assert all(set(_users(a)) == {"boot", "u0", "u1", "u2"} for a in nodes)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    assert_no_tracebacks(cluster)

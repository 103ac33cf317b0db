"""``odradek acls add|list|remove`` against a real broker, with kafka-acls.sh's
options; errors in one line with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from tests.integration.security.aclsupport import STANDARD


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**{"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}) as b:
        yield b


def odradek(broker: Broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args, "--bootstrap-server",
                           broker.bootstrap_servers], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def listed(broker: Broker, *args: str) -> list[dict[str, Any]]:
    return list(json.loads(odradek(broker, "acls", "list", *args, "--json").stdout))


def row(rtype: str, name: str, pattern: str, principal: str, op: str, perm: str,
        host: str = "*") -> dict[str, str]:
    return {"resource_type": rtype, "name": name, "pattern_type": pattern,
            "principal": principal, "host": host, "operation": op, "permission": perm}


def test_add_list_remove(broker: Broker) -> None:
    odradek(broker, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "describe", "--topic", "orders")
    odradek(broker, "acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.7",
            "--topic", "orders")
    odradek(broker, "acls", "add", "--allow-principal", "User:carol", "--operation",
            "IdempotentWrite", "--cluster")
    assert sorted(map(str, listed(broker, "--topic", "orders"))) == sorted(map(str, [
        row("TOPIC", "orders", "LITERAL", "User:alice", "READ", "ALLOW"),
        row("TOPIC", "orders", "LITERAL", "User:alice", "DESCRIBE", "ALLOW"),
        row("TOPIC", "orders", "LITERAL", "User:bob", "ALL", "DENY", "10.0.0.7")]))
    assert listed(broker, "--principal", "User:carol") == [
        row("CLUSTER", "kafka-cluster", "LITERAL", "User:carol", "IDEMPOTENT_WRITE", "ALLOW")]
    table = odradek(broker, "acls", "list").stdout
    assert "User:alice" in table and "IDEMPOTENT_WRITE" in table
    out = odradek(broker, "acls", "remove", "--allow-principal", "User:alice", "--operation",
                  "Read", "--topic", "orders").stdout
    assert "Removed 1 ACL" in out
    odradek(broker, "acls", "remove", "--topic", "orders")
    assert listed(broker, "--topic", "orders") == []
    odradek(broker, "acls", "remove", "--cluster")
    assert listed(broker) == []


def test_producer_consumer_and_prefixed(broker: Broker) -> None:
    odradek(broker, "acls", "add", "--allow-principal", "User:app", "--producer", "--idempotent",
            "--topic", "pay-", "--resource-pattern-type", "prefixed",
            "--transactional-id", "tx")
    odradek(broker, "acls", "add", "--allow-principal", "User:app", "--consumer",
            "--topic", "pay-", "--resource-pattern-type", "prefixed", "--group", "app")
    found = {(a["resource_type"], a["name"], a["pattern_type"], a["operation"])
             for a in listed(broker, "--principal", "User:app")}
    assert found == {
        ("TOPIC", "pay-", "PREFIXED", "WRITE"), ("TOPIC", "pay-", "PREFIXED", "DESCRIBE"),
        ("TOPIC", "pay-", "PREFIXED", "CREATE"), ("TOPIC", "pay-", "PREFIXED", "READ"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE"),
        ("TRANSACTIONAL_ID", "tx", "PREFIXED", "WRITE"),
        ("TRANSACTIONAL_ID", "tx", "PREFIXED", "DESCRIBE"),
        ("GROUP", "app", "PREFIXED", "READ")}
    # match: every ACL that applies to a name
    assert {a["operation"] for a in listed(broker, "--topic", "pay-eu",
                                           "--resource-pattern-type", "match")} == {
        "WRITE", "DESCRIBE", "CREATE", "READ"}
    odradek(broker, "acls", "remove", "--topic", "pay-", "--group", "app",
            "--transactional-id", "tx", "--cluster", "--resource-pattern-type", "any")
    assert listed(broker) == []


def test_errors_are_one_line(broker: Broker) -> None:
    for args in (["acls", "add", "--topic", "t"],
                 ["acls", "add", "--allow-principal", "alice", "--topic", "t"],
                 ["acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic",
                  "t"],
                 ["acls", "add", "--allow-principal", "User:a", "--topic", "t",
                  "--resource-pattern-type", "match"],
                 ["acls", "remove"]):
        proc = odradek(broker, *args, ok=False)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("odradek: "), proc.stderr
    with Broker() as plain:
        proc = odradek(plain, "acls", "list", ok=False)
        assert proc.stderr.count("\n") == 1 and "SECURITY_DISABLED" in proc.stderr, proc.stderr

"""``odradek configs describe|alter`` against a real broker: a topic's configs,
a broker's and the cluster defaults (each value with Kafka's source name),
client quotas, and errors in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(num_partitions="3") as b:
        yield b


def odradek(broker: Broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args, "--bootstrap-server",
                           broker.bootstrap_servers], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def configs(broker: Broker, *entity: str, everything: bool = False) -> dict[str, Any]:
    out = odradek(broker, "configs", "describe", *entity, "--json",
                  *(["--all"] if everything else []))
    return {c["name"]: (c["value"], c["source"]) for c in json.loads(out.stdout)["configs"]}


def test_topic_configs_set_list_and_delete(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cfg-topic")
    assert configs(broker, "--topic", "cfg-topic") == {}
    odradek(broker, "configs", "alter", "--topic", "cfg-topic", "--add-config",
            "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert configs(broker, "--topic", "cfg-topic") == {
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG")}
    every = configs(broker, "--topic", "cfg-topic", everything=True)
    assert every["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert every["segment.bytes"][1] == "DEFAULT_CONFIG" and len(every) > 10
    odradek(broker, "configs", "alter", "--topic", "cfg-topic", "--delete-config",
            "retention.ms")
    assert configs(broker, "--topic", "cfg-topic") == {
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG")}
    table = odradek(broker, "configs", "describe", "--topic", "cfg-topic").stdout
    assert "cleanup.policy" in table and "DYNAMIC_TOPIC_CONFIG" in table


def test_broker_and_cluster_default_configs_with_their_sources(broker: Broker) -> None:
    every = configs(broker, "--broker", "1", everything=True)
    assert every["num.partitions"] == ("3", "STATIC_BROKER_CONFIG")  # the broker's settings
    odradek(broker, "configs", "alter", "--broker-defaults", "--add-config",
            "log.retention.ms=604800000")
    assert configs(broker, "--broker-defaults") == {
        "log.retention.ms": ("604800000", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    every = configs(broker, "--broker", "1", everything=True)
    assert every["log.retention.ms"] == ("604800000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    odradek(broker, "configs", "alter", "--broker", "1", "--add-config",
            "log.retention.ms=86400000")
    assert configs(broker, "--broker", "1") == {
        "log.retention.ms": ("86400000", "DYNAMIC_BROKER_CONFIG")}
    odradek(broker, "configs", "alter", "--broker", "1", "--delete-config", "log.retention.ms")
    odradek(broker, "configs", "alter", "--broker-defaults", "--delete-config",
            "log.retention.ms")
    assert configs(broker, "--broker", "1") == {} and configs(broker, "--broker-defaults") == {}


def test_client_quotas_through_configs(broker: Broker) -> None:
    odradek(broker, "configs", "alter", "--client-id", "cfg-app", "--add-config",
            "producer_byte_rate=1048576")
    rows = json.loads(odradek(broker, "configs", "describe", "--client-id", "cfg-app",
                              "--json").stdout)
    assert rows == [{"entity": [{"type": "client-id", "name": "cfg-app"}],
                     "key": "producer_byte_rate", "value": 1048576.0}]


def test_errors_are_one_line(broker: Broker) -> None:
    for args, message in (
        (["describe"], "name one entity"),
        (["describe", "--topic", "x", "--broker", "1"], "name one entity"),
        (["alter", "--topic", "cfg-none", "--add-config", "retention.ms=1"],
         "UNKNOWN_TOPIC_OR_PARTITION"),
        (["alter", "--topic", "x", "--add-config", "retention.ms"], "expects KEY=VALUE"),
        (["alter", "--topic", "x"], "nothing to alter"),
        (["describe", "--broker", "-1"], "broker id"),
    ):
        proc = odradek(broker, "configs", *args, ok=False)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr

"""``odradek features describe|upgrade|downgrade|disable`` against a real broker,
as ``kafka-features.sh`` shows and changes ``transaction.version`` and
``group.version``; refusals in one line with exit 1."""

from __future__ import annotations

import json
import subprocess
import sys

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from tests.integration.groupclients import wait_until
from tests.support.rawclient import RawClient


def odradek(broker: Broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", "features", *args,
                           "--bootstrap-server", broker.bootstrap_servers],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def levels(broker: Broker) -> dict[str, tuple[int, int, int]]:
    rows = json.loads(odradek(broker, "describe", "--json").stdout)
    return {r["feature"]: (r["supported_min"], r["supported_max"], r["finalized"])
            for r in rows}


def test_describe_upgrade_downgrade_disable_transaction_version(broker: Broker) -> None:
    assert levels(broker) == {"group.version": (0, 1, 1), "kraft.version": (0, 1, 0),
                              "metadata.version": (25, 25, 25),
                              "transaction.version": (0, 2, 2)}
    text = odradek(broker, "describe").stdout.splitlines()
    line = next(t for t in text if t.startswith("Feature: transaction.version\t"))
    assert line.split("\t")[1:4] == ["SupportedMinVersion: 0", "SupportedMaxVersion: 2",
                                     "FinalizedVersionLevel: 2"]
    assert line.split("\t")[4].startswith("Epoch: ")

    dry = odradek(broker, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert dry.stdout.strip() == "transaction.version can be downgraded to 1."
    assert levels(broker)["transaction.version"][2] == 2  # a dry run changes nothing
    down = odradek(broker, "downgrade", "--feature", "transaction.version=1")
    assert down.stdout.strip() == "transaction.version was downgraded to 1."
    assert levels(broker)["transaction.version"][2] == 1

    # a lower level through "upgrade" is refused, in one line
    refused = odradek(broker, "upgrade", "--feature", "transaction.version=0", ok=False)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "downgrade" in refused.stderr
    unknown = odradek(broker, "upgrade", "--feature", "transaction.version=3", ok=False)
    assert "not supported" in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1

    assert odradek(broker, "disable", "--feature", "transaction.version").stdout.strip() == (
        "transaction.version was disabled.")
    assert levels(broker)["transaction.version"][2] == 0
    up = odradek(broker, "upgrade", "--feature", "transaction.version=2")
    assert up.stdout.strip() == "transaction.version was upgraded to 2."
    assert levels(broker)["transaction.version"][2] == 2


def test_bad_feature_arguments_are_one_line(broker: Broker) -> None:
    bad = odradek(broker, "upgrade", "--feature", "transaction.version", ok=False)
    assert "expected NAME=LEVEL" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_single_node_has_no_kraft_version_to_upgrade(broker: Broker) -> None:
    refused = odradek(broker, "upgrade", "--feature", "kraft.version=1", ok=False)
    assert "no controller quorum" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert levels(broker)["kraft.version"] == (0, 1, 0)


def _join(raw: RawClient, member: str) -> int:
    resp = raw.request(ConsumerGroupHeartbeatRequest(
        group_id="gv", member_id=member, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=["gv-topic"], topic_partitions=[]), 1)
    return int(resp.error_code)


def test_group_version_0_turns_the_consumer_protocol_off_until_it_is_upgraded(
        broker: Broker) -> None:
    raw = RawClient(broker.bootstrap_servers)
    try:
        # served on a new cluster (group.version 1): once __consumer_offsets is up
        wait_until(lambda: _join(raw, "m-1") == 0, 30, "the consumer protocol served")
        down = odradek(broker, "downgrade", "--feature", "group.version=0")
        assert down.stdout.strip() == "group.version was downgraded to 0."
        assert levels(broker)["group.version"] == (0, 1, 0)
        # as Kafka's brokers at group.version 0: UNSUPPORTED_VERSION, nothing else
        assert _join(raw, "m-2") == ErrorCode.UNSUPPORTED_VERSION
        described = raw.request(ConsumerGroupDescribeRequest(group_ids=["gv"]), 0)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("gv", ErrorCode.UNSUPPORTED_VERSION)]
        up = odradek(broker, "upgrade", "--feature", "group.version=1")
        assert up.stdout.strip() == "group.version was upgraded to 1."
        assert _join(raw, "m-3") == 0
        described = raw.request(ConsumerGroupDescribeRequest(group_ids=["gv"]), 0)
        assert described.groups[0].error_code == 0
    finally:
        raw.close()


def test_rebalance_protocols_without_consumer_turn_the_consumer_protocol_off() -> None:
    with Broker(**{"group.coordinator.rebalance.protocols": "classic"}) as only_classic:
        raw = RawClient(only_classic.bootstrap_servers)
        try:
            assert _join(raw, "m-1") == ErrorCode.UNSUPPORTED_VERSION
            assert levels(only_classic)["group.version"] == (0, 1, 1)  # the feature is on
        finally:
            raw.close()

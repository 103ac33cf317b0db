"""``kraft.version`` 0 -> 1 on a real static quorum (``controller.quorum.voters``),
as ``kafka-features.sh upgrade --feature kraft.version=1`` does it: the voters,
with the directory ids of their ``meta.properties`` and their CONTROLLER
endpoints, become a VotersRecord, and the quorum is dynamic from then on (a
voter restarted on a new port updates its endpoint; a full restart keeps the
level)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_dynamic_quorum import (
    FAST,
    endpoints,
    meta_directory_id,
    mq,
    status,
    wait_voters,
)
from tests.support.cluster import LocalCluster, assert_no_tracebacks, free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def features(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "features", *args,
                           "--bootstrap-server", cluster.bootstrap.split(",")[0]],
                          capture_output=True, text=True, timeout=120)


def kraft_level(cluster: LocalCluster) -> int:
    proc = features(cluster, "describe", "--json")
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in json.loads(proc.stdout) if r["feature"] == "kraft.version")
    assert (row["supported_min"], row["supported_max"]) == (0, 1)
    return int(row["finalized"])


def test_a_static_quorum_upgrades_to_kraft_version_1(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=1, overrides=FAST)
    cluster.format()
    cluster.start()
    try:
        wait_voters(cluster, {1, 2, 3})
        dirs = {n: meta_directory_id(cluster, n) for n in (1, 2, 3)}
        # Every voter must have fetched from the leader (Fetch v17 names its directory).
        def all_fetched() -> bool:
            rows = json.loads(mq(cluster, "describe", "--replication", "--json"))
            return all(r["LastFetchTimestamp"] > 0 for r in rows
                       if r["Status"] in ("Leader", "Follower"))
        wait_for("every voter fetching", all_fetched, 60, interval_s=0.5)
        assert kraft_level(cluster) == 0
        dry = features(cluster, "upgrade", "--feature", "kraft.version=1", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert kraft_level(cluster) == 0
        up = features(cluster, "upgrade", "--feature", "kraft.version=1")
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == "kraft.version was upgraded to 1."
        wait_for("kraft.version 1 finalized", lambda: kraft_level(cluster) == 1, 60,
                 interval_s=0.5)
        assert wait_voters(cluster, {1, 2, 3}) == dirs
        assert endpoints(cluster) == {
            n: f"CONTROLLER://127.0.0.1:{cluster.nodes[n].controller_port}" for n in (1, 2, 3)}
        down = features(cluster, "downgrade", "--feature", "kraft.version=0")
        assert down.returncode == 1 and "downgrade" in down.stderr

        # Dynamic now: a follower restarted on a new port updates its endpoint.
        leader = status(cluster)["LeaderId"]
        moved = min(n for n in (1, 2, 3) if n != leader)
        node = cluster.nodes[moved]
        cluster.terminate(moved)
        old, new = f"CONTROLLER://127.0.0.1:{node.controller_port}", free_port()
        text = node.properties.read_text()
        assert f"listeners={old}" in text
        node.properties.write_text(text.replace(f"listeners={old}",
                                                f"listeners=CONTROLLER://127.0.0.1:{new}"))
        node.controller_port = new
        cluster.start(moved)
        wait_for(f"node {moved}'s new endpoint", lambda: endpoints(cluster).get(moved) ==
                 f"CONTROLLER://127.0.0.1:{new}", 60, interval_s=0.5)

        # A full restart keeps the level and the voter set (both are in the log).
        cluster.stop_all(clean=True)
        cluster.start()
        assert wait_voters(cluster, {1, 2, 3}) == dirs
        wait_for("kraft.version 1 after the restart", lambda: kraft_level(cluster) == 1, 60,
                 interval_s=0.5)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("up", 1, 1)], request_timeout=30)["up"].result(60)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        producer.produce("up", b"1")
        assert producer.flush(60) == 0
        assert_no_tracebacks(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()

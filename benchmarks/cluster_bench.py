"""The controller quorum: failover time and metadata propagation, on real processes.

    python benchmarks/cluster_bench.py [--runs 10] [--skip election,propagation]

A 3-node combined cluster (``process.roles=broker,controller``) on 127.0.0.1,
formatted and started as a user would (tests/support/cluster.py), with
Kafka's default quorum timers: ``controller.quorum.fetch.timeout.ms=2000``,
``controller.quorum.election.timeout.ms=1000``.

(a) Election after ``kill -9`` of the active controller: the time from the
    kill until a surviving node answers DescribeQuorum as leader of a higher
    epoch (polled every 10 ms on the survivors' CONTROLLER listeners). The
    killed node is restarted and rejoins before the next run. Baseline (the
    same timers in Kafka): a follower waits ``fetch.timeout.ms`` without a
    fetch answer before it stands, then needs one pre-vote and one vote round
    trip, so Kafka's own failover with these defaults is at least 2000 ms and
    at most about 2000 + 1000 (random election timeout) ms; the ratio printed
    is the measured median over 2000 ms.
(b) Metadata propagation: the time from CreateTopics sent to the controller
    (answered once the quorum has committed it) until every broker answers
    Metadata with the topic and its leaders (each broker polled every 5 ms).
    Baseline: Kafka's brokers learn new metadata by fetching the quorum's log
    with ``fetch.max.wait`` up to 500 ms, answered as soon as new records
    commit, so the expected delay is one fetch round trip after the commit.

Median of ``--runs`` with min-max.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.client.connection import Connection
from odradek.wire.messages import describe_quorum_request as dq
from odradek.wire.messages import metadata_request as mr
from tests.support.cluster import LocalCluster, wait_for

KAFKA_FAILOVER_FLOOR_MS = 2000


async def _quorum_view(address: str) -> tuple[int, int] | None:
    """(leader id, epoch) as a node answers DescribeQuorum, if it leads."""
    try:
        conn = await Connection.open(address, "bench", timeout_s=0.5)
    except Exception:
        return None
    try:
        request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata",
                                                         [dq.PartitionData(0)])])
        resp = await asyncio.wait_for(conn.request(request, 1, 1), 1.0)
        p = resp.topics[0].partitions[0]
        return (p.leader_id, p.leader_epoch) if p.error_code == 0 else None
    except Exception:
        return None
    finally:
        await conn.close()


def leader_of(cluster: LocalCluster, among: list[int]) -> tuple[int, int] | None:
    for node_id in among:
        view = asyncio.run(_quorum_view(f"127.0.0.1:{cluster.nodes[node_id].controller_port}"))
        if view is not None:
            return view
    return None


def bench_election(cluster: LocalCluster, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        leader, epoch = wait_for("a leader", lambda: leader_of(cluster, [1, 2, 3]), 60)
        survivors = [n for n in (1, 2, 3) if n != leader]
        # let the followers settle into fetching from this leader first
        time.sleep(1.0)
        cluster.kill(leader)
        t0 = time.perf_counter()
        while True:
            view = leader_of(cluster, survivors)
            if view is not None and view[1] > epoch:
                break
            time.sleep(0.01)
        out.append((time.perf_counter() - t0) * 1000)
        cluster.start(leader)
        wait_for("the node back", lambda: _brokers(cluster) == 3, 60)
    return out


async def _metadata_has(address: str, topic: str) -> bool:
    conn = await Connection.open(address, "bench", timeout_s=2)
    try:
        resp = await conn.request(mr.MetadataRequest(
            [mr.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 9)
        t = resp.topics[0]
        return t.error_code == 0 and bool(t.partitions) and all(
            p.leader_id >= 0 for p in t.partitions)
    finally:
        await conn.close()


def _brokers(cluster: LocalCluster) -> int:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=3000)
    try:
        # kafka-python asks for fenced brokers too (DescribeCluster v2): count the live.
        return len([b for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")])
    finally:
        admin.close()


def bench_propagation(cluster: LocalCluster, runs: int) -> list[float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    out = []
    for i in range(runs):
        name = f"prop-{i}"
        t0 = time.perf_counter()
        admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
        pending = {n.address for n in cluster.brokers}
        while pending:
            pending = {a for a in pending if not asyncio.run(_metadata_has(a, name))}
            if pending:
                time.sleep(0.005)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _summary(label: str, values: list[float], baseline_ms: float | None) -> None:
    med = statistics.median(values)
    line = f"{label}: median {med:.0f} ms (min {min(values):.0f}, max {max(values):.0f})"
    if baseline_ms:
        line += (f"; Kafka with the same timers >= {baseline_ms:.0f} ms, "
                 f"ratio {med / baseline_ms:.2f}")
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--skip", default="", help="comma list: election,propagation")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="odradek-cluster-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), controllers=3)
        cluster.format()
        cluster.start()
        try:
            wait_for("three brokers", lambda: _brokers(cluster) == 3, 60)
            if "propagation" not in skip:
                _summary("metadata propagation (create topic -> all 3 brokers serve it)",
                         bench_propagation(cluster, args.runs), None)
            if "election" not in skip:
                _summary("election after kill -9 of the active controller",
                         bench_election(cluster, args.runs), KAFKA_FAILOVER_FLOOR_MS)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

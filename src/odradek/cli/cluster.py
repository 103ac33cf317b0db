"""``odradek cluster describe``: cluster id, controller, brokers and the quorum.

DescribeCluster where the broker serves it, else Metadata (older brokers); in
cluster mode also DescribeQuorum (the broker forwards it to the active
controller): leader, epoch, high watermark, and each voter's and observer's
log end offset, lag behind the leader and time since its last fetch.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cluster = sub.add_parser("cluster", help="describe the cluster")
    verbs = cluster.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="cluster id, controller and brokers")
    add_bootstrap(describe)
    describe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return with_client(args, lambda c: _describe(c, args))


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    if 60 in client.bootstrap.versions:
        resp = await client.request(DescribeClusterRequest(), 1)
        check(resp.error_code, resp.error_message)
        cluster_id, controller = resp.cluster_id, resp.controller_id
        brokers = [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
    else:
        meta = await client.metadata([])
        cluster_id, controller = meta.cluster_id or "", meta.controller_id
        brokers = [(b.node_id, b.host, b.port, b.rack) for b in meta.brokers]
    brokers.sort()
    quorum = await _quorum(client)
    if quorum is not None:
        # Brokers name a live broker as the controller (as Kafka's KRaft brokers
        # do); the quorum names the active one.
        controller = quorum[0]
    if args.json:
        emit_json({"cluster_id": cluster_id, "controller": controller, "brokers": [
            {"id": i, "host": h, "port": p, "rack": r} for i, h, p, r in brokers
        ]})
        return 0
    print(f"Cluster id: {cluster_id}")
    print(f"Controller: {controller}")
    table(["ID", "HOST", "PORT", "RACK"], [[i, h, p, r or "-"] for i, h, p, r in brokers])
    if quorum is not None:
        leader, epoch, hw, rows = quorum
        print(f"\nQuorum: leader {leader}, epoch {epoch}, high watermark {hw}")
        table(["NODE", "ROLE", "LOG END", "LAG", "LAST FETCH (ms ago)"], rows)
    return 0


async def _quorum(client: KafkaClient) -> tuple[int, int, int, list[list[object]]] | None:
    """DescribeQuorum's answer as table rows; None on a single node."""
    import time

    from odradek.wire.messages import describe_quorum_request as dq

    if 55 not in client.bootstrap.versions:
        return None
    request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata", [dq.PartitionData(0)])])
    resp = await client.request(request, 1)
    if resp.error_code or not resp.topics or not resp.topics[0].partitions:
        return None
    part = resp.topics[0].partitions[0]
    if part.error_code:
        return None
    now = int(time.time() * 1000)
    rows: list[list[object]] = []
    for role, replicas in (("voter", part.current_voters), ("observer", part.observers)):
        for r in replicas:
            ago = now - r.last_fetch_timestamp if r.last_fetch_timestamp >= 0 else "-"
            shown = "leader" if r.replica_id == part.leader_id else role
            rows.append([r.replica_id, shown, r.log_end_offset,
                         max(0, part.high_watermark - r.log_end_offset), ago])
    return part.leader_id, part.leader_epoch, part.high_watermark, rows

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
from odradek.client.admin import describe_cluster, describe_quorum
from odradek.client.client import KafkaClient


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cluster = sub.add_parser("cluster", help="describe the cluster")
    verbs = cluster.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="cluster id, controller and brokers")
    add_bootstrap(describe)
    describe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return with_client(args, lambda c: _describe(c, args))


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    cluster = await describe_cluster(client)
    controller = cluster.controller
    quorum = await describe_quorum(client)
    if quorum is not None:
        # Brokers name a live broker as the controller (as Kafka's KRaft brokers
        # do); the quorum names the active one.
        controller = quorum.leader
    if args.json:
        emit_json({"cluster_id": cluster.cluster_id, "controller": controller, "brokers": [
            {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cluster.brokers
        ]})
        return 0
    print(f"Cluster id: {cluster.cluster_id}")
    print(f"Controller: {controller}")
    table(["ID", "HOST", "PORT", "RACK"],
          [[b.node_id, b.host, b.port, b.rack or "-"] for b in cluster.brokers])
    if quorum is not None:
        print(f"\nQuorum: leader {quorum.leader}, epoch {quorum.epoch}, "
              f"high watermark {quorum.high_watermark}")
        table(["NODE", "ROLE", "LOG END", "LAG", "LAST FETCH (ms ago)"], [
            [r.node_id, r.role, r.log_end_offset, r.lag,
             "-" if r.last_fetch_ms_ago is None else r.last_fetch_ms_ago]
            for r in quorum.replicas])
    return 0

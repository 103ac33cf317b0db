"""``odradek cluster describe``: cluster id, controller and brokers.

DescribeCluster where the broker serves it, else Metadata (older brokers).
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
    return with_client(args.bootstrap_server, lambda c: _describe(c, args))


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
    if args.json:
        emit_json({"cluster_id": cluster_id, "controller": controller, "brokers": [
            {"id": i, "host": h, "port": p, "rack": r} for i, h, p, r in brokers
        ]})
        return 0
    print(f"Cluster id: {cluster_id}")
    print(f"Controller: {controller}")
    table(["ID", "HOST", "PORT", "RACK"], [[i, h, p, r or "-"] for i, h, p, r in brokers])
    return 0

"""``odradek leaders elect`` and ``odradek topics reassign`` (Kafka's
``kafka-leader-election.sh`` and ``kafka-reassign-partitions.sh``).

``leaders elect`` sends ElectLeaders: ``--type preferred`` (the default) moves
each named partition's leadership back to its first replica if that replica
is live and in sync; ``--type unclean`` gives a leaderless partition any live
replica, at the risk of losing acknowledged records (docs/durability.md).
Without ``--topic`` it covers every partition and lists only those it moved.

``topics reassign TOPIC --partition N --replicas 3,1,2`` sends
AlterPartitionReassignments: the new replicas copy the partition, and once all
are in the ISR the controller switches to the target list (the first is the
preferred leader) and drops the others. ``--cancel`` stops a reassignment
under way; ``--list`` shows those under way (ListPartitionReassignments).
``odradek reassign`` (odradek.cli.reassign) is the plan-file tool with the
throttles.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import alter_partition_reassignments_request as apr
from odradek.wire.messages import elect_leaders_request as el
from odradek.wire.messages import list_partition_reassignments_request as lpr

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    leaders = sub.add_parser("leaders", help="elect partition leaders")
    verbs = leaders.add_subparsers(dest="verb", required=True)
    elect = verbs.add_parser("elect", help="preferred or unclean leader election")
    elect.add_argument("--type", choices=sorted(ELECTION_TYPES), default="preferred")
    elect.add_argument("--topic", help="default: every partition")
    elect.add_argument("--partition", type=int, action="append", default=[],
                       help="with --topic (repeatable); default: all of its partitions")
    add_bootstrap(elect)
    elect.set_defaults(
        run=lambda a: with_client(a, lambda c: elect_leaders(c, a)))


def add_reassign(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``odradek topics reassign`` (registered by odradek.cli.topics)."""
    reassign = verbs.add_parser("reassign", help="move a partition's replicas")
    reassign.add_argument("topic", nargs="?")
    reassign.add_argument("--partition", type=int)
    reassign.add_argument("--replicas", help="the new replica list, e.g. 3,1,2")
    reassign.add_argument("--cancel", action="store_true", help="stop the one under way")
    reassign.add_argument("--list", action="store_true", help="show reassignments under way")
    add_bootstrap(reassign)
    reassign.set_defaults(
        run=lambda a: with_client(a, lambda c: reassign_run(c, a)))


async def elect_leaders(client: KafkaClient, args: argparse.Namespace) -> int:
    partitions: list[el.TopicPartitions] | None = None
    if args.topic:
        wanted = args.partition or sorted((await client.partitions(args.topic)).keys())
        partitions = [el.TopicPartitions(args.topic, wanted)]
    elif args.partition:
        raise CliError("--partition needs --topic")
    resp = await client.request(el.ElectLeadersRequest(
        ELECTION_TYPES[args.type], partitions, 30000), 2, 1)
    check(resp.error_code)
    rows = [[r.topic, p.partition_id, ErrorCode(p.error_code).name if p.error_code else "elected",
             p.error_message or ""]
            for r in resp.replica_election_results for p in r.partition_result]
    if args.json:
        emit_json([{"topic": t, "partition": p, "result": s, "message": m} for t, p, s, m in rows])
    elif rows:
        table(["TOPIC", "PARTITION", "RESULT", "MESSAGE"], rows)
    else:
        print("No partition needed an election.")
    failed = [r for r in rows if r[2] not in ("elected", "ELECTION_NOT_NEEDED")]
    return 1 if failed else 0


async def reassign_run(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.list:
        resp = await client.request(lpr.ListPartitionReassignmentsRequest(30000, None), 0)
        check(resp.error_code, resp.error_message)
        rows = [[t.name, p.partition_index, ",".join(map(str, p.replicas)),
                 ",".join(map(str, p.adding_replicas)), ",".join(map(str, p.removing_replicas))]
                for t in resp.topics for p in t.partitions]
        if args.json:
            emit_json([dict(zip(("topic", "partition", "replicas", "adding", "removing"), r,
                                strict=True)) for r in rows])
        elif rows:
            table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"], rows)
        else:
            print("No reassignment in progress.")
        return 0
    if not args.topic or args.partition is None or (args.cancel == bool(args.replicas)):
        raise CliError("give TOPIC --partition N and either --replicas LIST or --cancel "
                       "(or --list)")
    replicas = None
    if args.replicas:
        try:
            replicas = [int(r) for r in args.replicas.split(",")]
        except ValueError:
            raise CliError(f"--replicas: not a comma-separated list of broker ids: "
                           f"{args.replicas!r}") from None
    resp = await client.request(apr.AlterPartitionReassignmentsRequest(30000, [
        apr.ReassignableTopic(args.topic, [apr.ReassignablePartition(args.partition, replicas)])
    ]), 0)
    check(resp.error_code, resp.error_message)
    result = resp.responses[0].partitions[0]
    check(result.error_code, result.error_message)
    what = "cancelled" if replicas is None else f"started: replicas -> {args.replicas}"
    if args.json:
        emit_json({"topic": args.topic, "partition": args.partition,
                   "replicas": replicas, "cancelled": replicas is None})
    else:
        print(f"Reassignment of {args.topic}-{args.partition} {what}.")
    return 0

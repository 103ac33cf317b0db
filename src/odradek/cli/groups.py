"""``odradek groups list|describe|reset-offsets|delete`` (``kafka-consumer-groups.sh``).

``describe`` shows, per partition the group has committed or is assigned:
the committed offset, the log end offset and the lag between them, and the
member that owns it. ``reset-offsets`` plans new committed offsets for a
topic's partitions (``--to-earliest``, ``--to-latest``, ``--to-offset N``,
``--shift-by N``, clamped to the log's range) and prints the plan; only with
``--execute`` are they committed, which Kafka allows only while the group has
no active members.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import EARLIEST, LATEST, KafkaClient
from odradek.client.groups import (
    commit_offsets,
    delete_group,
    describe_group,
    fetch_all_committed,
    fetch_committed,
    list_groups,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups")
    verbs = groups.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="every group, with its state")
    describe = verbs.add_parser("describe", help="members, offsets and lag of a group")
    describe.add_argument("group")
    reset = verbs.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int)
    reset.add_argument("--execute", action="store_true", help="commit (default: only show)")
    delete = verbs.add_parser("delete", help="delete a group with no members, and its offsets")
    delete.add_argument("group")
    for p in (listing, describe, reset, delete):
        add_bootstrap(p)
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    verbs = {"list": _list, "describe": _describe, "reset-offsets": _reset, "delete": _delete}
    return with_client(args, lambda c: verbs[args.verb](c, args))


async def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    groups = await list_groups(client)
    if args.json:
        emit_json([{"group": g, "protocol_type": t, "state": s} for g, t, s in groups])
    else:
        table(["GROUP", "STATE", "PROTOCOL-TYPE"], [[g, s, t] for g, t, s in groups])
    return 0


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    desc = await describe_group(client, args.group)
    committed = await fetch_all_committed(client, args.group)
    if desc.state == "Dead" and not committed:
        raise CliError(f"group {args.group!r} does not exist")
    owner: dict[tuple[str, int], Any] = {}
    for m in desc.members:
        for topic, parts in m.assignment.items():
            for p in parts:
                owner[(topic, p)] = m
    keys = sorted(set(committed) | set(owner))
    ends: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in keys}):
        leaders = await client.partitions(topic)
        wanted = {p: leaders[p] for t, p in keys if t == topic and p in leaders}
        for p, end in (await client.list_offsets(topic, wanted, LATEST)).items():
            ends[(topic, p)] = end
    rows = []
    for key in keys:
        current = committed.get(key, -1)
        end = ends.get(key, -1)
        who = owner.get(key)
        rows.append({
            "topic": key[0], "partition": key[1],
            "current_offset": current if current >= 0 else None,
            "log_end_offset": end,
            "lag": end - current if current >= 0 and end >= 0 else None,
            "consumer_id": who.member_id if who else None,
            "host": who.client_host if who else None,
            "client_id": who.client_id if who else None,
        })
    if args.json:
        emit_json({"group": args.group, "state": desc.state, "protocol": desc.protocol,
                   "members": len(desc.members), "partitions": rows})
        return 0
    print(f"Group {args.group}: state {desc.state}, {len(desc.members)} member(s)"
          + (f", protocol {desc.protocol}" if desc.protocol else ""))
    table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
           "HOST", "CLIENT-ID"],
          [[r["topic"], r["partition"], _dash(r["current_offset"]), r["log_end_offset"],
            _dash(r["lag"]), _dash(r["consumer_id"]), _dash(r["host"]), _dash(r["client_id"])]
           for r in rows])
    return 0


def _dash(value: object) -> object:
    return "-" if value is None else value


async def _reset(client: KafkaClient, args: argparse.Namespace) -> int:
    leaders = await client.partitions(args.topic)
    starts = await client.list_offsets(args.topic, leaders, EARLIEST)
    ends = await client.list_offsets(args.topic, leaders, LATEST)
    current = await fetch_committed(client, args.group, args.topic, sorted(leaders))
    plan: dict[int, int] = {}
    for p in sorted(leaders):
        if args.to_earliest:
            target = starts[p]
        elif args.to_latest:
            target = ends[p]
        elif args.to_offset is not None:
            target = args.to_offset
        else:
            base = current.get(p, -1)
            target = (base if base >= 0 else ends[p]) + args.shift_by
        plan[p] = min(max(target, starts[p]), ends[p])
    if args.execute:
        await commit_offsets(client, args.group, args.topic, plan)
    if args.json:
        emit_json({"group": args.group, "topic": args.topic, "executed": args.execute,
                   "offsets": {str(p): o for p, o in plan.items()}})
        return 0
    table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
          [[args.group, args.topic, p, o] for p, o in plan.items()])
    if not args.execute:
        print("(dry run: add --execute to commit these offsets)")
    return 0


async def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    await delete_group(client, args.group)
    if args.json:
        emit_json({"deleted": args.group})
    else:
        print(f"Deleted group {args.group}.")
    return 0

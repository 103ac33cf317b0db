"""``odradek reassign``: Kafka's ``kafka-reassign-partitions.sh``, over the wire.

Exactly one action:

* ``--generate --topics-to-move-json-file F --broker-list 4,5``: prints the
  current assignment of those topics and a proposal spreading them over the
  brokers (:func:`~odradek.cli.reassign_plan.propose`); changes nothing;
* ``--execute --reassignment-json-file PLAN [--throttle BYTES] [--additional]``:
  checks the plan (topics, partitions and brokers exist), prints the current
  assignment as a rollback plan, sets the throttle (the leader and follower
  rates on every broker of the moves, the topics' throttled-replica lists:
  leader = the current replicas, follower = the added ones) and sends
  AlterPartitionReassignments. A reassignment already under way refuses it
  unless ``--additional`` (which may also just change the rate);
* ``--verify --reassignment-json-file PLAN [--preserve-throttles]``: each
  partition completed, still in progress, or settled elsewhere; once all are
  complete the throttles are removed (the rates on every broker, the lists of
  the plan's topics), saying so;
* ``--cancel --reassignment-json-file PLAN [--preserve-throttles]``: cancels
  the plan's reassignments under way (the replicas go back to what they were)
  and removes the throttles;
* ``--list``: the reassignments under way (ListPartitionReassignments).

Errors are one line and exit status 1, as Kafka's tool (argparse's own usage
errors exit 2, as every odradek command). ``--replica-alter-log-dirs-throttle``
and non-``any`` ``log_dirs`` are not supported.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from odradek.cli.common import BROKER_RESOURCE, TOPIC_RESOURCE, CliError, add_bootstrap
from odradek.cli.reassign_plan import (
    Assignment,
    parse_plan,
    parse_topics,
    plan_json,
    propose,
    throttles,
)
from odradek.cli.session import with_client
from odradek.client import admin
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import alter_partition_reassignments_request as apr
from odradek.wire.messages import list_partition_reassignments_request as lpr
from odradek.wire.messages.list_partition_reassignments_response import (
    OngoingPartitionReassignment,
)

RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
ACTIONS = ("generate", "execute", "verify", "cancel", "list")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("reassign", help="move partitions between brokers "
                                        "(kafka-reassign-partitions.sh)")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--reassignment-json-file", type=Path, metavar="FILE")
    p.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    p.add_argument("--broker-list", metavar="IDS", help="with --generate, e.g. 4,5,6")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES",
                   help="with --execute: replication bytes per second per broker")
    p.add_argument("--additional", action="store_true",
                   help="with --execute: add to (or re-throttle) reassignments under way")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify or --cancel: leave the throttles in place")
    add_bootstrap(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise CliError("Command must include exactly one action: --generate, --execute, "
                       "--verify, --cancel, or --list")
    action = chosen[0]
    if action in ("execute", "verify", "cancel") and args.reassignment_json_file is None:
        raise CliError(f"--{action} needs --reassignment-json-file")
    if args.throttle >= 0 and action != "execute":
        raise CliError("--throttle goes with --execute")
    if action == "generate":
        if args.topics_to_move_json_file is None or not args.broker_list:
            raise CliError("--generate needs --topics-to-move-json-file and --broker-list")
        topics = parse_topics(args.topics_to_move_json_file)
        brokers = _broker_list(args.broker_list)
        return with_client(args, lambda c: _generate(c, topics, brokers))
    if action == "list":
        return with_client(args, _list)
    plan = parse_plan(args.reassignment_json_file)
    work = {"execute": _execute, "verify": _verify, "cancel": _cancel}[action]
    return with_client(args, lambda c: work(c, plan, args))


def _broker_list(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--broker-list: expected broker ids like 4,5,6, got {text!r}") from None
    if not ids or len(set(ids)) != len(ids):
        raise CliError(f"--broker-list: expected distinct broker ids, got {text!r}")
    return ids


async def _current(client: KafkaClient, topics: list[str]) -> Assignment:
    """Every partition of ``topics`` and its replicas (Metadata)."""
    resp = await client.metadata(sorted(set(topics)))
    out: Assignment = {}
    for t in resp.topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CliError(f"Topic {t.name} not found")
        check(t.error_code, f"topic {t.name!r}")
        for p in t.partitions:
            out[(str(t.name), p.partition_index)] = list(p.replica_nodes)
    return out


async def _ongoing(client: KafkaClient) -> dict[tuple[str, int], OngoingPartitionReassignment]:
    """The reassignments under way (ListPartitionReassignments)."""
    resp = await client.request(lpr.ListPartitionReassignmentsRequest(30000, None), 0)
    check(resp.error_code, resp.error_message)
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


async def _generate(client: KafkaClient, topics: list[str], brokers: list[int]) -> int:
    live = {b.node_id for b in (await admin.describe_cluster(client)).brokers}
    unknown = sorted(set(brokers) - live)
    if unknown:
        raise CliError(f"The broker list contains unknown brokers: {','.join(map(str, unknown))}")
    current = await _current(client, topics)
    print("Current partition replica assignment")
    print(plan_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(plan_json(propose(current, brokers)))
    return 0


async def _check_plan(client: KafkaClient, plan: Assignment) -> Assignment:
    """The plan's partitions' current replicas; a one-line error for an unknown
    topic, partition or broker."""
    current = await _current(client, [t for t, _ in plan])
    missing = [f"{t}-{p}" for t, p in plan if (t, p) not in current]
    if missing:
        raise CliError(f"Unknown topic partitions: {', '.join(missing)}")
    live = {b.node_id for b in (await admin.describe_cluster(client)).brokers}
    unknown = sorted({b for r in plan.values() for b in r} - live)
    if unknown:
        raise CliError("The proposed assignment contains non-existent brokerIDs: "
                       + ",".join(map(str, unknown)))
    return {k: current[k] for k in plan}


async def _execute(client: KafkaClient, plan: Assignment, args: argparse.Namespace) -> int:
    current = await _check_plan(client, plan)
    ongoing = await _ongoing(client)
    if ongoing and not args.additional:
        raise CliError("Cannot execute because there is an existing partition assignment. "
                       "Use --additional to override this and create a new partition "
                       "assignment in addition to the existing one.")
    print("Current partition replica assignment")
    print()
    print(plan_json(current))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        moves = throttles(current, plan)
        for topic in sorted(set(moves.leader) | set(moves.follower)):
            await admin.alter_configs(client, TOPIC_RESOURCE, topic, {
                LISTS[0]: moves.leader.get(topic, ""), LISTS[1]: moves.follower.get(topic, "")},
                [])
        for broker in moves.brokers:
            await admin.alter_configs(client, BROKER_RESOURCE, str(broker),
                                      dict.fromkeys(RATES, str(args.throttle)), [])
        print("Warning: You must run --verify periodically, until the reassignment "
              "completes, to ensure the throttle is removed.")
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    errors = await _alter(client, {k: r for k, r in plan.items() if r != current[k]
                                   or k in ongoing})
    started = sorted(set(plan) - set(errors))
    if started:
        print("Successfully started partition reassignment(s) for "
              + ",".join(f"{t}-{p}" for t, p in started))
    return _report_errors(errors, "Error reassigning partition(s):")


async def _alter(client: KafkaClient, targets: dict[tuple[str, int], list[int] | None],
                 ) -> dict[tuple[str, int], str]:
    """AlterPartitionReassignments for ``targets`` (None: cancel); the failures."""
    if not targets:
        return {}
    topics: dict[str, list[apr.ReassignablePartition]] = {}
    for (t, p), replicas in sorted(targets.items()):
        topics.setdefault(t, []).append(apr.ReassignablePartition(p, replicas))
    resp = await client.request(apr.AlterPartitionReassignmentsRequest(30000, [
        apr.ReassignableTopic(t, ps) for t, ps in topics.items()]), 0)
    check(resp.error_code, resp.error_message)
    return {(t.name, p.partition_index): p.error_message or ErrorCode(p.error_code).name
            for t in resp.responses for p in t.partitions if p.error_code}


def _report_errors(errors: dict[tuple[str, int], str], title: str) -> int:
    if not errors:
        return 0
    raise CliError(title + " " + "; ".join(f"{t}-{p}: {m}" for (t, p), m in sorted(
        errors.items())))


async def _verify(client: KafkaClient, plan: Assignment, args: argparse.Namespace) -> int:
    ongoing = await _ongoing(client)
    current = await _check_plan(client, plan)
    print("Status of partition reassignment:")
    done = True
    for key, target in sorted(plan.items()):
        name = f"{key[0]}-{key[1]}"
        if key in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
            done = False
        elif current[key] == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{','.join(map(str, current[key]))} rather than "
                  f"{','.join(map(str, target))}.")
    if done and not args.preserve_throttles:
        await _clear_throttles(client, sorted({t for t, _ in plan}))
    return 0


async def _clear_throttles(client: KafkaClient, topics: list[str]) -> None:
    """Delete the rates on every broker and the lists of ``topics``, as Kafka's
    tool does, saying where."""
    brokers = [b.node_id for b in (await admin.describe_cluster(client)).brokers]
    for broker in brokers:
        await admin.alter_configs(client, BROKER_RESOURCE, str(broker), {}, list(RATES))
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    for topic in topics:
        await admin.alter_configs(client, TOPIC_RESOURCE, topic, {}, list(LISTS))
        print(f"Clearing topic-level throttles on topic {topic}")


async def _cancel(client: KafkaClient, plan: Assignment, args: argparse.Namespace) -> int:
    ongoing = await _ongoing(client)
    targets: dict[tuple[str, int], list[int] | None] = {k: None for k in plan if k in ongoing}
    errors = await _alter(client, targets)
    cancelled = sorted(set(targets) - set(errors))
    if cancelled:
        print("Successfully cancelled partition reassignment(s) for: "
              + ",".join(f"{t}-{p}" for t, p in cancelled))
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        await _clear_throttles(client, sorted({t for t, _ in plan}))
    return _report_errors(errors, "Error cancelling partition reassignment(s):")


async def _list(client: KafkaClient) -> int:
    ongoing = await _ongoing(client)
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), r in sorted(ongoing.items()):
        print(f"{t}-{p}: replicas: {','.join(map(str, r.replicas))}. "
              f"adding: {','.join(map(str, r.adding_replicas))}. "
              f"removing: {','.join(map(str, r.removing_replicas))}.")
    return 0

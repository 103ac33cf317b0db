"""``odradek topics create|list|describe|delete|alter|reassign`` (Kafka's
``kafka-topics.sh``; ``reassign`` is in odradek.cli.leaders).

``describe`` shows each partition's leader ("none" when offline), replicas, ISR
and status (ok, under-replicated, offline); ``--under-replicated-partitions``
and ``--unavailable-partitions`` show only those, as Kafka's tool does.

Everything goes through the wire protocol: CreateTopics, Metadata,
DescribeConfigs (configs that differ from the broker default), DeleteTopics,
CreatePartitions and IncrementalAlterConfigs; ``describe --producers`` adds
each partition's active producers (DescribeProducers, as
``kafka-transactions.sh describe-producers``).

For a compacted topic ``describe`` also shows each partition's cleaner
checkpoint (its first dirty offset) and dirty ratio. No Kafka API carries
them (Kafka itself has them only in its ``cleaner-offset-checkpoint`` file
and as JMX metrics), and inventing fields would bend the protocol, so they
are read from the broker's log directory, on the broker's host: its path comes
from DescribeLogDirs (or ``--log-dir``), and a partition directory counts only
when its ``partition.metadata`` names the topic id Metadata gave, so a
same-named directory of another broker is never taken for it. The first dirty
offset is the ``cleaner-offset-checkpoint`` entry (written after each pass),
or the log start offset before the first pass; the dirty ratio is the
cleaner's: bytes of inactive segments holding offsets at or past it over
bytes of all inactive segments (before the limits a pass adds: the last stable
offset, the recovery point and ``min.compaction.lag.ms``). When the directory
is not readable here, the output says so (``"cleaner": null`` in ``--json``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import uuid
from typing import Any

from odradek.cli.common import DEFAULT_SOURCE, TOPIC_RESOURCE, CliError, add_bootstrap
from odradek.cli.leaders import add_reassign
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client import admin
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.client.transactions import describe_producers
from odradek.storage.checkpoint import (
    CheckpointFormatError,
    parse_offsets,
    parse_partition_metadata,
)
from odradek.storage.names import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA_FILE,
    parse_segment_file_name,
    partition_dir_name,
)
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    topics = sub.add_parser("topics", help="create, list, describe, delete and alter topics")
    verbs = topics.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    listing = verbs.add_parser("list", help="list topic names")
    listing.add_argument("--exclude-internal", action="store_true")
    describe = verbs.add_parser("describe", help="partitions, leaders and configs")
    describe.add_argument("topics", nargs="*", help="default: every topic")
    describe.add_argument("--producers", action="store_true",
                          help="also each partition's active producers (DescribeProducers)")
    describe.add_argument("--log-dir", metavar="DIR",
                          help="the broker's log directory, for compacted topics' cleaner "
                               "state (default: the one DescribeLogDirs names, if it is on "
                               "this machine)")
    describe.add_argument("--under-replicated-partitions", action="store_true",
                          help="only partitions whose ISR is smaller than their replicas")
    describe.add_argument("--unavailable-partitions", action="store_true",
                          help="only partitions without a live leader")
    add_reassign(verbs)
    delete = verbs.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+")
    alter = verbs.add_parser("alter", help="add partitions, set or delete configs")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, help="the new total partition count")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY")
    for p in (create, listing, describe, delete, alter):
        add_bootstrap(p)
        p.set_defaults(run=run)


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--config takes KEY=VALUE, not {item!r}")
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    verbs = {"create": _create, "list": _list, "describe": _describe, "delete": _delete,
             "alter": _alter}
    return with_client(args, lambda c: verbs[args.verb](c, args))


async def _create(client: KafkaClient, args: argparse.Namespace) -> int:
    partitions, replication = await admin.create_topic(
        client, args.topic, args.partitions, args.replication_factor, _pairs(args.config))
    if args.json:
        emit_json({"topic": args.topic, "partitions": partitions,
                   "replication_factor": replication})
    else:
        print(f"Created topic {args.topic}.")
    return 0


async def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    resp = await client.metadata(None)
    names = sorted(t.name or "" for t in resp.topics
                   if not (args.exclude_internal and t.is_internal))
    if args.json:
        emit_json(names)
    else:
        for name in names:
            print(name)
    return 0


async def _configs(client: KafkaClient, names: list[str],
                   ) -> tuple[dict[str, dict[str, str]], set[str]]:
    """Each topic's configs that differ from the default, and the compacted topics."""
    resp = await client.request(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n,
                                configuration_keys=None)
        for n in names
    ]), 4, 1)
    out: dict[str, dict[str, str]] = {}
    compacted = set()
    for r in resp.results:
        check(r.error_code, r.error_message)
        out[r.resource_name] = {
            c.name: c.value or "" for c in r.configs if c.config_source != DEFAULT_SOURCE
        }
        if any(c.name == "cleanup.policy" and "compact" in (c.value or "").split(",")
               for c in r.configs):
            compacted.add(r.resource_name)
    return out, compacted


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    resp = await client.metadata(args.topics or None)
    topics = sorted(resp.topics, key=lambda t: t.name or "")
    for t in topics:
        check(t.error_code, f"topic {t.name!r}")
    configs, compacted = (await _configs(client, [t.name or "" for t in topics]) if topics
                          else ({}, set()))
    described: list[dict[str, Any]] = [{
        "topic": t.name, "topic_id": str(t.topic_id), "internal": t.is_internal,
        "partitions": [
            {"partition": p.partition_index, "leader": p.leader_id,
             "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
             "status": _status(p.leader_id, list(p.replica_nodes), list(p.isr_nodes))}
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
            if _shown(args, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
        ],
        "configs": configs.get(t.name or "", {}),
    } for t in topics]
    if args.producers:
        for d in described:
            await _add_producers(client, d)
    log_dir = None
    if compacted:
        log_dir = args.log_dir or await _broker_log_dir(client)
        ids = {t.name: t.topic_id for t in topics}
        for d in described:
            if d["topic"] in compacted:
                for p in d["partitions"]:
                    p["cleaner"] = cleaner_state(log_dir, d["topic"], p["partition"],
                                                 ids[d["topic"]])
    if args.json:
        emit_json(described)
        return 0
    for d in described:
        cfg = ",".join(f"{k}={v}" for k, v in sorted(d["configs"].items()))
        print(f"Topic: {d['topic']}  TopicId: {d['topic_id']}  "
              f"PartitionCount: {len(d['partitions'])}  Configs: {cfg}")
        cleaner = d["topic"] in compacted
        table(["Partition", "Leader", "Replicas", "Isr", "Status",
               *(["FirstDirtyOffset", "DirtyRatio"] if cleaner else [])], [
            [p["partition"], p["leader"] if p["leader"] >= 0 else "none",
             ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])), p["status"],
             *(_cleaner_cells(p["cleaner"]) if cleaner else [])]
            for p in d["partitions"]
        ])
        if cleaner and any(p["cleaner"] is None for p in d["partitions"]):
            print(f"(cleaner state not shown: no partition directory of this topic in "
                  f"{log_dir!r} on this machine; no Kafka API carries it, so run this on the "
                  f"broker's host or give --log-dir)")
        if args.producers:
            rows = [[p["partition"], s["producer_id"], s["producer_epoch"], s["last_sequence"],
                     s["last_timestamp"], s["coordinator_epoch"],
                     s["current_txn_start_offset"]]
                    for p in d["partitions"] for s in p["producers"]]
            if rows:
                table(["Partition", "ProducerId", "ProducerEpoch", "LastSequence",
                       "LastTimestamp", "CoordinatorEpoch", "CurrentTxnStartOffset"], rows)
            else:
                print("(no active producers)")
    return 0


def _status(leader: int, replicas: list[int], isr: list[int]) -> str:
    """offline (no live leader), under-replicated (ISR smaller than the replicas), or ok."""
    if leader < 0:
        return "offline"
    return "under-replicated" if len(isr) < len(replicas) else "ok"


def _shown(args: argparse.Namespace, leader: int, replicas: list[int], isr: list[int]) -> bool:
    status = _status(leader, replicas, isr)
    if args.unavailable_partitions and status != "offline":
        return False
    return not (args.under_replicated_partitions and status == "ok")


async def _broker_log_dir(client: KafkaClient) -> str | None:
    """The log directory the bootstrap broker names in DescribeLogDirs."""
    resp = await client.request(DescribeLogDirsRequest(topics=[]), 4, 1)
    return resp.results[0].log_dir if resp.results else None


def cleaner_state(log_dir: str | None, topic: str, partition: int,
                  topic_id: uuid.UUID) -> dict[str, Any] | None:
    """The partition's cleaner checkpoint and dirty ratio, read from its files in
    ``log_dir`` (see the module docstring); None when they are not here."""
    if not log_dir:
        return None
    path = os.path.join(log_dir, partition_dir_name(topic, partition))
    try:
        with open(os.path.join(path, PARTITION_METADATA_FILE), "rb") as f:
            if parse_partition_metadata(f.read()) != topic_id:
                return None
        segments = []  # (base offset, size) of each segment, oldest first
        for name in os.listdir(path):
            parsed = parse_segment_file_name(name)
            if parsed is not None and parsed[1] == ".log":
                try:
                    segments.append((parsed[0], os.stat(os.path.join(path, name)).st_size))
                except FileNotFoundError:
                    continue  # swapped out by a pass while we looked
    except (OSError, CheckpointFormatError, UnicodeDecodeError):
        return None
    segments.sort()
    starts = _checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
    log_start = starts.get((topic, partition), segments[0][0] if segments else 0)
    checkpoint = _checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT).get((topic, partition), -1)
    first_dirty = checkpoint if checkpoint >= log_start else log_start
    inactive = [(size, nxt[0]) for (_, size), nxt in itertools.pairwise(segments)]
    total = sum(size for size, _ in inactive)
    dirty = sum(size for size, end in inactive if end > first_dirty)
    return {"first_dirty_offset": first_dirty, "checkpointed": checkpoint >= log_start,
            "dirty_ratio": round(dirty / total, 4) if total else 0.0,
            "dirty_bytes": dirty, "inactive_bytes": total}


def _checkpoint(log_dir: str, name: str) -> dict[tuple[str, int], int]:
    try:
        with open(os.path.join(log_dir, name), "rb") as f:
            return parse_offsets(f.read())
    except (OSError, CheckpointFormatError, UnicodeDecodeError):
        return {}


def _cleaner_cells(state: dict[str, Any] | None) -> list[Any]:
    if state is None:
        return ["-", "-"]
    return [state["first_dirty_offset"], f"{state['dirty_ratio']:.2f}"]


async def _add_producers(client: KafkaClient, described: dict[str, Any]) -> None:
    """Each partition's active producers, into ``described["partitions"]``."""
    leaders = {p["partition"]: p["leader"] for p in described["partitions"]}
    producers = await describe_producers(client, described["topic"], leaders) if leaders else {}
    for p in described["partitions"]:
        p["producers"] = [{
            "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
            "last_sequence": s.last_sequence, "last_timestamp": s.last_timestamp,
            "coordinator_epoch": s.coordinator_epoch,
            "current_txn_start_offset": s.current_txn_start_offset,
        } for s in producers.get(p["partition"], [])]


async def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    await admin.delete_topics(client, list(args.topics))
    if args.json:
        emit_json({"deleted": list(args.topics)})
    else:
        for name in args.topics:
            print(f"Deleted topic {name}.")
    return 0


async def _alter(client: KafkaClient, args: argparse.Namespace) -> int:
    changes = _pairs(args.config)
    if args.partitions is None and not changes and not args.delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    if args.partitions is not None:
        await admin.create_partitions(client, args.topic, args.partitions)
    if changes or args.delete_config:
        await admin.alter_configs(client, TOPIC_RESOURCE, args.topic, changes,
                                  list(args.delete_config))
    if args.json:
        emit_json({"topic": args.topic, "partitions": args.partitions,
                   "set": changes, "deleted": args.delete_config})
    else:
        print(f"Altered topic {args.topic}.")
    return 0

"""``odradek transactions list|describe|find-hanging|abort`` (Kafka's ``kafka-transactions.sh``).

``list`` asks every broker for the transactions it coordinates
(ListTransactions; ``--state``, ``--producer-id`` and ``--duration-ms``
filter); ``describe`` asks the id's coordinator (DescribeTransactions) and,
for each partition of an open transaction, the partition's leader for the
transaction's first offset there (DescribeProducers): the ``--start-offset``
that ``abort`` takes. ``find-hanging`` lists open transactions of partitions
(every topic, ``--topic`` or the partitions ``--broker-id`` leads) older than
``--max-transaction-timeout`` minutes (default 15, Kafka's
``transaction.max.timeout.ms``) that their coordinator does not hold: they
hold the partition's last stable offset back, so read_committed consumers
stall there, until ``abort`` closes them.
``abort`` closes a hanging transaction on one partition by writing an ABORT
marker there (WriteTxnMarkers, KIP-664), as ``kafka-transactions.sh abort``
does: name the producer with ``--producer-id``, ``--producer-epoch`` and
``--coordinator-epoch``, or give ``--start-offset`` (the first offset of the
open transaction) and the producer is found with DescribeProducers. Records
of the aborted transaction are then skipped by read_committed consumers,
whose last stable offset moves past them.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.client.transactions import (
    abort_transaction,
    describe_producers,
    describe_transaction,
    find_hanging,
    list_transactions,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    txns = sub.add_parser("transactions", help="list, describe and abort transactions")
    verbs = txns.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="every transactional id, with its state")
    listing.add_argument("--state", action="append", default=[], metavar="STATE",
                         help="only these states (Kafka's names: Ongoing, CompleteCommit, ...)")
    listing.add_argument("--producer-id", action="append", type=int, default=[], metavar="N",
                         help="only these producer ids")
    listing.add_argument("--duration-ms", type=int, metavar="MS",
                         help="only transactions running longer than this")
    describe = verbs.add_parser("describe", help="state, producer and partitions of an id")
    describe.add_argument("transactional_id")
    hanging = verbs.add_parser("find-hanging",
                               help="open transactions no coordinator holds (to abort)")
    hanging.add_argument("--topic", help="only this topic's partitions")
    hanging.add_argument("--broker-id", type=int, help="only the partitions this broker leads")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                         help="only transactions whose last write is older than this "
                              "(default 15, transaction.max.timeout.ms)")
    abort = verbs.add_parser("abort", help="write an ABORT marker to a partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, metavar="OFFSET",
                       help="the open transaction's first offset (finds the producer)")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    for p in (listing, describe, hanging, abort):
        add_bootstrap(p)
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.verb == "abort":
        _check_abort_args(args)
    if args.verb == "list" and args.duration_ms is not None and args.duration_ms < 0:
        raise CliError("--duration-ms must not be negative")
    if args.verb == "find-hanging" and args.max_transaction_timeout < 0:
        raise CliError("--max-transaction-timeout must not be negative")
    verbs = {"list": _list, "describe": _describe, "find-hanging": _find_hanging,
             "abort": _abort}
    return with_client(args, lambda c: verbs[args.verb](c, args))


def _check_abort_args(args: argparse.Namespace) -> None:
    if args.partition < 0:
        raise CliError("--partition must not be negative")
    named = [args.producer_id, args.producer_epoch, args.coordinator_epoch]
    if args.start_offset is not None:
        if any(v is not None for v in named):
            raise CliError("give either --start-offset or --producer-id, --producer-epoch "
                           "and --coordinator-epoch, not both")
        return
    if any(v is None for v in named):
        raise CliError("abort needs --producer-id, --producer-epoch and --coordinator-epoch "
                       "(or --start-offset)")
    if args.producer_id < 0:
        raise CliError("--producer-id must not be negative")
    if not 0 <= args.producer_epoch <= 32767:
        raise CliError("--producer-epoch must be between 0 and 32767")


async def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    listings, unknown = await list_transactions(
        client, args.state, args.producer_id, args.duration_ms)
    if unknown:
        raise CliError(f"unknown transaction state(s): {', '.join(unknown)}")
    if args.json:
        emit_json([{"transactional_id": t.transactional_id, "coordinator": t.coordinator,
                    "producer_id": t.producer_id, "state": t.state} for t in listings])
    else:
        table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"],
              [[t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listings])
    return 0


async def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    d = await describe_transaction(client, args.transactional_id)
    now = int(time.time() * 1000)
    starts = await _start_offsets(client, d.producer_id, d.partitions)
    described: dict[str, Any] = {
        "transactional_id": d.transactional_id, "coordinator": d.coordinator,
        "producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "state": d.state,
        "timeout_ms": d.timeout_ms, "start_time_ms": d.start_time_ms,
        "duration_ms": now - d.start_time_ms if d.start_time_ms >= 0 else None,
        "partitions": [{"topic": t, "partition": p, "start_offset": starts.get((t, p))}
                       for t, p in d.partitions],
    }
    if args.json:
        emit_json(described)
        return 0
    table(["COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
           "TIMEOUT-MS", "START-TIME-MS", "DURATION-MS", "PARTITIONS"],
          [[d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.timeout_ms, d.start_time_ms,
            "-" if described["duration_ms"] is None else described["duration_ms"],
            ",".join(f"{t}-{p}" + (f"@{starts[t, p]}" if (t, p) in starts else "")
                     for t, p in d.partitions) or "-"]])
    if starts:
        print("(topic-partition@offset: the transaction's first offset there, the "
              "--start-offset of transactions abort)")
    return 0


async def _start_offsets(client: KafkaClient, producer_id: int,
                         partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The first offset of ``producer_id``'s open transaction in each partition
    (DescribeProducers on each leader); partitions it has not written yet are left out."""
    out: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in partitions}):
        leaders = await client.partitions(topic)
        wanted = {p: leaders[p] for t, p in partitions if t == topic and p in leaders}
        for partition, producers in (await describe_producers(client, topic, wanted)).items():
            for pr in producers:
                if pr.producer_id == producer_id and pr.current_txn_start_offset >= 0:
                    out[topic, partition] = pr.current_txn_start_offset
    return out


async def _find_hanging(client: KafkaClient, args: argparse.Namespace) -> int:
    resp = await client.metadata(None if args.topic is None else [args.topic])
    leaders: dict[str, dict[int, int]] = {}
    for t in resp.topics:
        check(t.error_code, f"topic {t.name!r}")
        parts = {p.partition_index: p.leader_id for p in t.partitions if p.leader_id >= 0
                 and (args.broker_id is None or p.leader_id == args.broker_id)}
        if parts:
            leaders[t.name or ""] = parts
    now = int(time.time() * 1000)
    found = await find_hanging(client, leaders, args.max_transaction_timeout * 60_000, now)
    rows = [{"topic": h.topic, "partition": h.partition, "producer_id": h.producer.producer_id,
             "producer_epoch": h.producer.producer_epoch,
             "coordinator_epoch": h.producer.coordinator_epoch,
             "start_offset": h.producer.current_txn_start_offset,
             "last_timestamp": h.producer.last_timestamp,
             "duration_min": (now - h.producer.last_timestamp) // 60_000} for h in found]
    if args.json:
        emit_json(rows)
        return 0
    table(["TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
           "START-OFFSET", "LAST-TIMESTAMP", "DURATION(MIN)"],
          [list(r.values()) for r in rows])
    if rows:
        print("(close one with: odradek transactions abort --topic TOPIC --partition "
              "PARTITION --start-offset START-OFFSET)")
    return 0


async def _abort(client: KafkaClient, args: argparse.Namespace) -> int:
    pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    if args.start_offset is not None:
        leaders = await client.partitions(args.topic)
        if args.partition not in leaders:
            raise CliError(f"topic {args.topic!r} has no partition {args.partition}")
        producers = (await describe_producers(
            client, args.topic, {args.partition: leaders[args.partition]}))[args.partition]
        found = [p for p in producers if p.current_txn_start_offset == args.start_offset]
        if not found:
            raise CliError(f"no open transaction starts at offset {args.start_offset} of "
                           f"{args.topic}-{args.partition}")
        (producer,) = found
        pid, epoch = producer.producer_id, producer.producer_epoch
        coordinator_epoch = producer.coordinator_epoch
    await abort_transaction(client, args.topic, args.partition, pid, epoch, coordinator_epoch)
    if args.json:
        emit_json({"topic": args.topic, "partition": args.partition, "producer_id": pid,
                   "producer_epoch": epoch, "coordinator_epoch": coordinator_epoch,
                   "aborted": True})
    else:
        print(f"Aborted the transaction of producer {pid} (epoch {epoch}) on "
              f"{args.topic}-{args.partition}.")
    return 0

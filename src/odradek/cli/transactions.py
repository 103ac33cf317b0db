"""``odradek transactions list|describe|abort`` (Kafka's ``kafka-transactions.sh``).

``list`` asks every broker for the transactions it coordinates
(ListTransactions; ``--state``, ``--producer-id`` and ``--duration-ms``
filter); ``describe`` asks the id's coordinator (DescribeTransactions).
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
from odradek.client.transactions import (
    abort_transaction,
    describe_producers,
    describe_transaction,
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
    abort = verbs.add_parser("abort", help="write an ABORT marker to a partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, metavar="OFFSET",
                       help="the open transaction's first offset (finds the producer)")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    for p in (listing, describe, abort):
        add_bootstrap(p)
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.verb == "abort":
        _check_abort_args(args)
    if args.verb == "list" and args.duration_ms is not None and args.duration_ms < 0:
        raise CliError("--duration-ms must not be negative")
    verbs = {"list": _list, "describe": _describe, "abort": _abort}
    return with_client(args.bootstrap_server, lambda c: verbs[args.verb](c, args))


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
    described: dict[str, Any] = {
        "transactional_id": d.transactional_id, "coordinator": d.coordinator,
        "producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "state": d.state,
        "timeout_ms": d.timeout_ms, "start_time_ms": d.start_time_ms,
        "duration_ms": now - d.start_time_ms if d.start_time_ms >= 0 else None,
        "partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
    }
    if args.json:
        emit_json(described)
        return 0
    table(["COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
           "TIMEOUT-MS", "START-TIME-MS", "DURATION-MS", "PARTITIONS"],
          [[d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.timeout_ms, d.start_time_ms,
            "-" if described["duration_ms"] is None else described["duration_ms"],
            ",".join(f"{t}-{p}" for t, p in d.partitions) or "-"]])
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

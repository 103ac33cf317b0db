"""``odradek produce TOPIC``: one record per input line (``kafka-console-producer.sh``).

Lines come from standard input or ``--file``; the trailing newline is not part
of the value. With ``--key-separator SEP`` each line is ``KEY<SEP>VALUE``
(split at the first SEP; a line without it is refused). Records go to
``--partition``, else to the key's partition by Kafka's murmur2 partitioner,
else round-robin a batch at a time. Records are sent in batches of up to
``--batch-records`` records / about 1 MiB (less when the topic's
``max.message.bytes`` or ``segment.bytes`` is smaller: a batch must fit both),
compressed with ``--compression``; each batch waits for its acknowledgement
(``--acks``, default all) before the next goes. A failure stops the run and
says how many records were acknowledged and the first input line that was not
(the line to resume from); a line too large for the topic is named before
anything after it is sent. A file shows a progress bar on a terminal.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Iterator
from typing import BinaryIO

from odradek.cli.common import TOPIC_RESOURCE, CliError, add_bootstrap
from odradek.cli.output import emit_json
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient, partition_for_key
from odradek.client.connection import ClientError, KafkaError, check
from odradek.wire.compression import CODEC_NAMES
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.records import Record, build_batch

CODECS = {name: codec for codec, name in CODEC_NAMES.items()}
BATCH_BYTES = 1 << 20
BATCH_OVERHEAD = 61
"""A v2 record batch's header; each record adds at most 21 bytes of framing."""
RECORD_OVERHEAD = 21


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("produce", help="write lines from stdin or a file as records")
    p.add_argument("topic")
    p.add_argument("--file", help="read this file instead of standard input")
    p.add_argument("--key-separator", help="each line is KEY<SEP>VALUE")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header for every record (repeatable)")
    p.add_argument("--compression", choices=sorted(CODECS), default="none")
    p.add_argument("--partition", type=int, help="write every record to this partition")
    p.add_argument("--acks", type=int, choices=(-1, 0, 1), default=-1)
    p.add_argument("--batch-records", type=int, default=1000)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: for --file on a terminal)")
    add_bootstrap(p)
    p.set_defaults(run=run)


def _headers(items: list[str]) -> tuple[tuple[str, bytes | None], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--header takes KEY=VALUE, not {item!r}")
        out.append((key, value.encode()))
    return tuple(out)


Line = tuple[int, bytes | None, bytes]
"""(line number from 1, key, value)"""


def _lines(stream: BinaryIO, separator: bytes | None) -> Iterator[Line]:
    for number, line in enumerate(stream, 1):
        line = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
        if separator is None:
            yield number, None, line
            continue
        key, sep, value = line.partition(separator)
        if not sep:
            raise CliError(f"line {number} has no key separator {separator.decode()!r}")
        yield number, key, value


class _Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.last = total, enabled, 0.0

    def show(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self.last < 0.1):
            return
        self.last = now
        share = done / self.total if self.total else 1.0
        bar = "#" * int(share * 30)
        sys.stderr.write(f"\r[{bar:<30}] {share:6.1%} {done}/{self.total} bytes")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    if args.batch_records < 1:
        raise CliError("--batch-records must be at least 1")
    headers = _headers(args.header)
    separator = args.key_separator.encode() if args.key_separator else None
    try:
        stream: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror}") from exc
    total = os.fstat(stream.fileno()).st_size if args.file else 0
    show = args.progress if args.progress is not None else bool(args.file) and sys.stderr.isatty()
    progress = _Progress(total, show)
    try:
        written = with_client(args, lambda c: _produce(
            c, args, _lines(stream, separator), headers, progress, stream
        ))
    finally:
        if args.file:
            stream.close()
    if args.json:
        emit_json({"topic": args.topic, "records": sum(written.values()),
                   "per_partition": {str(p): n for p, n in sorted(written.items())}})
    else:
        print(f"Produced {sum(written.values())} records to {args.topic}.", file=sys.stderr)
    return 0


async def _batch_limit(client: KafkaClient, topic: str) -> tuple[int, str]:
    """The largest batch the topic takes: (bytes, why), from its
    ``max.message.bytes`` and ``segment.bytes`` (1 MiB when they cannot be read)."""
    try:
        resp = await client.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic,
            configuration_keys=["max.message.bytes", "segment.bytes"])]), 4, 1)
        (r,) = resp.results
        check(r.error_code, r.error_message)
        sizes = {c.name: int(c.value) for c in r.configs if c.value and c.value.isdigit()}
    except (KafkaError, ClientError, ValueError):
        return BATCH_BYTES, "the default batch size"
    limit, why = BATCH_BYTES, "the default batch size"
    for name in ("max.message.bytes", "segment.bytes"):
        if name in sizes and sizes[name] < limit:
            limit, why = sizes[name], f"its {name} {sizes[name]}"
    return limit, why


class ProduceStopped(CliError):
    """A run that stopped part-way: how far it got, in one line."""


async def _produce(
    client: KafkaClient, args: argparse.Namespace, lines: Iterator[Line],
    headers: tuple[tuple[str, bytes | None], ...], progress: _Progress, stream: BinaryIO,
) -> dict[int, int]:
    # With --partition the topic must exist already: creating it, then failing
    # because it has too few partitions, would leave a topic nobody asked for.
    resp = await client.metadata([args.topic], allow_create=args.partition is None)
    (topic,) = resp.topics
    if topic.error_code == 3 and args.partition is not None:  # UNKNOWN_TOPIC_OR_PARTITION
        raise CliError(f"topic {args.topic!r} does not exist: create it first (odradek topics "
                       f"create {args.topic} --partitions {args.partition + 1}), or leave out "
                       f"--partition to have it created with the broker's defaults")
    check(topic.error_code, f"topic {args.topic!r}")
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    if args.partition is not None and args.partition not in leaders:
        raise CliError(f"topic {args.topic!r} has no partition {args.partition}")
    limit, why = await _batch_limit(client, args.topic)
    header_bytes = sum(len(k) + len(v or b"") + 10 for k, v in headers)
    count = len(leaders)
    round_robin = itertools.cycle(sorted(leaders))
    written: dict[int, int] = {}
    last_acked = 0  # the highest line number of an acknowledged record
    pending: dict[int, list[tuple[int, Record]]] = {}
    pending_bytes: dict[int, int] = {}

    def stopped(first: int, what: str) -> ProduceStopped:
        done = sum(written.values())
        return ProduceStopped(
            f"{what}; {done} records were acknowledged, the first line not written is line "
            f"{first}" + (" (some later lines, keyed to other partitions, were written)"
                           if last_acked > first else f": resume from line {first}"))

    async def send(partition: int) -> None:
        nonlocal last_acked
        records = pending.pop(partition, [])
        pending_bytes.pop(partition, None)
        if not records:
            return
        now = int(time.time() * 1000)
        batch = build_batch([
            Record(i, now, r.key, r.value, headers) for i, (_, r) in enumerate(records)
        ], compression=CODECS[args.compression])
        try:
            await client.produce(args.topic, partition, leaders[partition], batch, acks=args.acks)
        except (KafkaError, ClientError, OSError, TimeoutError) as exc:
            unsent = [n for n, _ in records] + [n for rs in pending.values() for n, _ in rs]
            raise stopped(min(unsent), f"producing to {args.topic}-{partition} failed: "
                                       f"{exc or type(exc).__name__}") from None
        written[partition] = written.get(partition, 0) + len(records)
        last_acked = max(last_acked, records[-1][0])
        if args.file:
            progress.show(stream.tell())

    sticky = next(round_robin)
    for number, key, value in lines:
        if args.partition is not None:
            partition = args.partition
        elif key is not None:
            partition = partition_for_key(key, count)
        else:
            partition = sticky
        size = len(key or b"") + len(value) + RECORD_OVERHEAD + header_bytes
        if size + BATCH_OVERHEAD > limit:
            for p in list(pending):
                await send(p)
            raise stopped(number, f"line {number} ({len(value)} bytes) is too large for topic "
                                  f"{args.topic!r} ({why}; raise it with odradek topics alter "
                                  f"{args.topic} --config max.message.bytes=...)")
        if pending_bytes.get(partition, BATCH_OVERHEAD) + size > limit:
            await send(partition)
        pending.setdefault(partition, []).append((number, Record(0, 0, key, value)))
        pending_bytes[partition] = pending_bytes.get(partition, BATCH_OVERHEAD) + size
        if len(pending[partition]) >= args.batch_records:
            await send(partition)
            if partition == sticky:
                sticky = next(round_robin)
    for partition in list(pending):
        await send(partition)
    progress.show(progress.total, final=True)
    return written

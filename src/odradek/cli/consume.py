"""``odradek consume TOPIC``: print records (``kafka-console-consumer.sh``).

Where reading starts, per partition: ``--partition P --offset O`` (a number,
``earliest`` or ``latest``); else with ``--group`` the group's committed
offset; else (and for partitions the group never committed) the log start
with ``--from-beginning``, the log end without. It stops after
``--max-messages`` records, or after ``--timeout-ms`` with nothing new, else
runs until Ctrl-C or SIGTERM.

With ``--group`` the command is a member of the group (the KIP-848 consumer
protocol, :mod:`odradek.client.member`): the coordinator assigns it a share
of the topic's partitions and rebalances them as other members come and go;
it starts each partition at the group's committed offset and commits what it
has printed at every heartbeat, when it gives a partition up, and when it
stops (Ctrl-C and SIGTERM included), then leaves the group. With ``--group``
and ``--partition`` it is not a member: it reads that partition and commits
to the group on the way out (a standalone commit, generation -1), to inspect
or move a group that has no members.

``--isolation-level read_committed`` prints only committed transactions'
records (and reads up to the last stable offset), as a Kafka consumer with
``isolation.level=read_committed`` does; the default, ``read_uncommitted``
(Kafka's console consumer's too), prints aborted transactions' records as
well, and says so at the end when it passed an abort marker.

Formats: ``value`` (one line per record), ``key-value`` (key, tab, value) and
``json`` (one object per line with topic, partition, offset, timestamp, key,
value and headers). Bytes that are not UTF-8 are printed with backslash
escapes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterable

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.session import with_client
from odradek.client.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchSeen,
    KafkaClient,
)
from odradek.client.connection import check
from odradek.client.groups import commit_offsets, fetch_committed
from odradek.client.member import GroupMember
from odradek.wire.records import Record


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("consume", help="print records of a topic")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--group", help="start from and commit to this group's offsets")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="with --partition: a number, earliest or latest")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="stop after this long with nothing new")
    p.add_argument("--format", choices=("value", "key-value", "json"), default="value")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed leaves out aborted transactions' records and reads "
                        "up to the last stable offset (default: read_uncommitted)")
    add_bootstrap(p)
    p.set_defaults(run=run)


def text(data: bytes | None) -> str | None:
    if data is None:
        return None
    return data.decode("utf-8", errors="backslashreplace")


def render(topic: str, partition: int, r: Record, fmt: str) -> str:
    if fmt == "value":
        return text(r.value) or ""
    if fmt == "key-value":
        return f"{text(r.key) or ''}\t{text(r.value) or ''}"
    return json.dumps({
        "topic": topic, "partition": partition, "offset": r.offset, "timestamp": r.timestamp,
        "key": text(r.key), "value": text(r.value),
        "headers": {k: text(v) for k, v in r.headers},
    })


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition")
    if args.json:
        args.format = "json"
    if args.group and args.partition is None:
        return with_client(args, lambda c: _as_member(c, args))
    return with_client(args, lambda c: _consume(c, args))


async def _start(client: KafkaClient, args: argparse.Namespace,
                 leaders: dict[int, int]) -> dict[int, int]:
    if args.partition is not None:
        if args.partition not in leaders:
            raise CliError(f"topic {args.topic!r} has no partition {args.partition}")
        leaders = {args.partition: leaders[args.partition]}
    reset = EARLIEST if args.from_beginning else LATEST
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        try:
            return {args.partition: int(args.offset)}
        except ValueError as exc:
            raise CliError(f"--offset takes a number, earliest or latest: {args.offset}") from exc
    if args.offset is not None:
        reset = EARLIEST if args.offset == "earliest" else LATEST
    starts = await client.list_offsets(args.topic, leaders, reset)
    if args.group and args.offset is None:
        committed = await fetch_committed(client, args.group, args.topic, list(leaders))
        starts.update({p: o for p, o in committed.items() if o >= 0})
    return starts


async def _consume(client: KafkaClient, args: argparse.Namespace) -> int:
    """Not a member: read the partitions (all, or ``--partition``) from where
    :func:`_start` says; with ``--group``, commit standalone on the way out."""
    leaders = await client.partitions(args.topic)
    positions = await _start(client, args, leaders)
    out = _Printer(args)
    try:
        while not out.full():
            await _fetch_round(client, args, leaders, positions, out)
            if out.idle():
                break
    finally:
        if args.group:
            await commit_offsets(client, args.group, args.topic, positions)
    out.summary()
    return 0


async def _fetch_round(client: KafkaClient, args: argparse.Namespace, leaders: dict[int, int],
                       positions: dict[int, int], out: _Printer) -> None:
    """One fetch from each leader of the partitions at ``positions``; prints
    what comes back and moves the positions past it."""
    for leader in sorted({leaders[p] for p in positions}):
        mine = {p: o for p, o in positions.items() if leaders[p] == leader}
        records, _ = await client.fetch(args.topic, leader, mine, max_wait_ms=200,
                                        isolation_level=out.isolation, seen=out.seen)
        for partition, recs in sorted(records.items()):
            out.print(partition, recs, positions)
    sys.stdout.flush()


class _Printer:
    """Prints records, counts them, and says when the run should stop."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.printed = 0
        self.last_new = time.monotonic()
        self.seen = FetchSeen()
        self.isolation = (READ_COMMITTED if args.isolation_level == "read_committed"
                          else READ_UNCOMMITTED)

    def full(self) -> bool:
        return self.args.max_messages is not None and self.printed >= self.args.max_messages

    def idle(self) -> bool:
        return self.args.timeout_ms is not None and (
            time.monotonic() - self.last_new) * 1000 >= self.args.timeout_ms

    def print(self, partition: int, records: list[Record], positions: dict[int, int]) -> None:
        for r in records:
            if self.full():
                return
            sys.stdout.write(render(self.args.topic, partition, r, self.args.format) + "\n")
            positions[partition] = r.offset + 1
            self.printed += 1
            self.last_new = time.monotonic()

    def summary(self) -> None:
        timed_out = self.args.max_messages is not None and not self.full()
        print(f"Processed {self.printed} messages" + (" (timed out)." if timed_out else "."),
              file=sys.stderr)
        if self.seen.abort_markers and self.isolation == READ_UNCOMMITTED:
            print(f"The records read include aborted transactions ({self.seen.abort_markers} "
                  f"abort markers passed); --isolation-level read_committed leaves them out.",
                  file=sys.stderr)


async def _as_member(client: KafkaClient, args: argparse.Namespace) -> int:
    """``consume --group``: a member of the group, printing what it is assigned."""
    resp = await client.metadata([args.topic])
    (topic,) = resp.topics
    check(topic.error_code, f"topic {args.topic!r}")
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    member = GroupMember(client, args.group, args.topic, topic.topic_id)
    out = _Printer(args)
    positions: dict[int, int] = {}
    committed: dict[int, int] = {}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    next_beat = 0.0

    def unsaved(partitions: Iterable[int]) -> dict[int, int]:
        """The positions of ``partitions`` not yet committed as they are."""
        return {p: positions[p] for p in partitions if positions[p] != committed.get(p)}

    try:
        while not stop.is_set() and not out.full():
            if time.monotonic() >= next_beat:
                beat = await member.heartbeat()
                next_beat = time.monotonic() + beat.interval_ms / 1000
                if beat.fenced:
                    positions.clear()  # another member may own them now: no commit
                if beat.assigned is not None:
                    lost = set(positions) - beat.assigned
                    await member.commit(unsaved(lost))
                    for p in lost:
                        del positions[p]
                    new = beat.assigned - set(positions)
                    if new:
                        positions.update(await _start(client, args, {
                            p: leaders[p] for p in new if p in leaders}))
                    if lost or new or member.owned != set(positions):
                        member.owned = set(positions)
                        next_beat = 0.0  # say at once what it owns now
                else:
                    await member.commit(unsaved(positions))
                    committed.update(positions)
            if not positions:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.1)
            await _fetch_round(client, args, leaders, positions, out)
            if out.idle():
                break
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        try:
            await member.commit(unsaved(positions))
        finally:
            await member.leave()
    out.summary()
    return 0

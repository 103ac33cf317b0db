"""``/topics/{name}/messages``: the message browser, its live tail and a
produce form.

Browsing starts at the beginning, the end (the last ``limit`` records of
each partition), an offset, or a timestamp (ListOffsets), and keeps records
whose key, value or a header (name or value) contains the filter text. One
request reads at most :data:`MAX_SCANNED` records and for at most
:data:`MAX_SEARCH_S`, then shows what it found and where it stopped.

``/topics/{name}/tail`` is a server-sent event stream (``text/event-stream``):
one ``data:`` line of JSON per record produced after it opened (the
:func:`shown` form), a ``:`` comment as keep-alive, and an ``event: end``
after :data:`TAIL_MAX_S` (the page then stops its EventSource). It polls
on a client of its own and ends as soon as the browser goes away. Each
event's ``id`` is where the tail stands, ``partition:next offset`` pairs
joined by commas (``0:17,1:9``); a browser reconnecting after a dropped
stream sends it back as ``Last-Event-ID`` and the tail resumes there, so
no record is skipped. A leader change refreshes the leaders and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from datetime import datetime
from typing import Any

from aiohttp import web

from odradek.client.client import EARLIEST, LATEST, KafkaClient, partition_for_key
from odradek.client.connection import ClientError, KafkaError
from odradek.console.web import BadForm, back, console, field, form, int_field, render, web_quote
from odradek.wire.records import Record, build_batch

routes = web.RouteTableDef()
MAX_SCANNED = 20_000
MAX_SEARCH_S = 5.0
MAX_LIMIT = 500
TAIL_MAX_S = 600.0
MAX_EVENT_ID = 4096
"""Longest ``Last-Event-ID`` read (and event id written: past it, none)."""
MAX_TAILS = 16
"""Live tails at once (each holds a Kafka connection); more are answered 503."""
KEEPALIVE_S = 10.0
MAX_SHOWN_BYTES = 64 << 10
"""Bytes of a key or value shown; the rest is cut."""
MODES = ("start", "end", "offset", "timestamp")


def text(data: bytes | None) -> str | None:
    if data is None:
        return None
    cut = data[:MAX_SHOWN_BYTES]
    try:
        out = cut.decode("utf-8")
    except UnicodeDecodeError:
        out = "0x" + cut.hex()
    return out + (f"… ({len(data)} bytes)" if len(data) > MAX_SHOWN_BYTES else "")


def pretty(value: str | None) -> str | None:
    """A JSON object or array, indented; None when ``value`` is not one."""
    if not value or value[0] not in "[{":
        return None
    try:
        return json.dumps(json.loads(value), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def shown(partition: int, r: Record) -> dict[str, Any]:
    value = text(r.value)
    return {"partition": partition, "offset": r.offset, "timestamp": r.timestamp,
            "time": datetime.fromtimestamp(r.timestamp / 1000).isoformat(sep=" ",
                                                                        timespec="milliseconds"),
            "key": text(r.key), "value": value, "json": pretty(value),
            "headers": [[k, text(v)] for k, v in r.headers]}


def matches(r: Record, needle: bytes) -> bool:
    return (needle in (r.key or b"") or needle in (r.value or b"")
            or any(needle in k.encode() or needle in (v or b"") for k, v in r.headers))


async def _starts(client: KafkaClient, topic: str, leaders: dict[int, int], mode: str,
                  offset: int, timestamp: int, limit: int) -> dict[int, int]:
    earliest = await client.list_offsets(topic, leaders, EARLIEST)
    latest = await client.list_offsets(topic, leaders, LATEST)
    if mode == "start":
        return earliest
    if mode == "end":
        return {p: max(earliest[p], latest[p] - limit) for p in leaders}
    if mode == "offset":
        return {p: min(max(offset, earliest[p]), latest[p]) for p in leaders}
    at = await client.list_offsets(topic, leaders, timestamp)
    return {p: at[p] if at[p] >= 0 else latest[p] for p in leaders}


async def browse(client: KafkaClient, topic: str, partition: int | None, mode: str,
                 offset: int, timestamp: int, needle: str, limit: int) -> dict[str, Any]:
    """Up to ``limit`` matching records, and whether the scan stopped early."""
    leaders = await client.partitions(topic)
    if partition is not None:
        if partition not in leaders:
            raise BadForm(f"{topic} has no partition {partition}")
        leaders = {partition: leaders[partition]}
    leaders = {p: node for p, node in leaders.items() if node >= 0}
    positions = await _starts(client, topic, leaders, mode, offset, timestamp, limit)
    ends = await client.list_offsets(topic, leaders, LATEST)
    wanted = needle.encode()
    found: list[dict[str, Any]] = []
    scanned, deadline, stopped = 0, time.monotonic() + MAX_SEARCH_S, None
    todo = {p for p in leaders if positions[p] < ends[p]}
    newest = mode == "end"  # keep reading: the newest ``limit`` matches are shown
    while todo and (newest or len(found) < limit):
        if scanned >= MAX_SCANNED:
            stopped = f"scanned {scanned} records"
            break
        if time.monotonic() > deadline:
            stopped = f"searched for {MAX_SEARCH_S:.0f} s"
            break
        for node in {leaders[p] for p in todo}:
            parts = {p: positions[p] for p in todo if leaders[p] == node}
            records, _ = await client.fetch(topic, node, parts, max_wait_ms=0,
                                            partition_max_bytes=256 << 10)
            for p, recs in records.items():
                for r in recs:
                    if r.offset >= ends[p]:
                        break
                    scanned += 1
                    positions[p] = r.offset + 1
                    if matches(r, wanted) and (newest or len(found) < limit):
                        found.append(shown(p, r))
                if not recs or positions[p] >= ends[p]:
                    todo.discard(p)  # an empty answer: a gap to the end (compacted)
    found.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
    if newest:
        found = found[-limit:]
    return {"records": found, "scanned": scanned, "stopped": stopped,
            "positions": positions, "partitions": sorted(await client.partitions(topic))}


@routes.get("/topics/{name}/messages")
async def messages(request: web.Request) -> web.Response:
    name, q = request.match_info["name"], request.query
    mode = q.get("from", "end")
    if mode not in MODES:
        raise BadForm(f"'from' is one of {', '.join(MODES)}")
    partition = int_field(dict(q), "partition", -1, low=-1)
    limit = min(int_field(dict(q), "limit", 50, low=1), MAX_LIMIT)
    offset = int_field(dict(q), "offset", 0, low=0) if mode == "offset" else 0
    timestamp = 0
    if mode == "timestamp":
        try:
            timestamp = int(datetime.fromisoformat(field(dict(q), "timestamp")).timestamp()
                            * 1000)
        except ValueError:
            raise BadForm("'timestamp' is a date and time: 2026-01-31T12:00") from None
    needle = q.get("filter", "")[:200]
    result = await console(request).run(lambda c: browse(
        c, name, None if partition < 0 else partition, mode, offset, timestamp, needle, limit))
    return render(request, "messages.html", topic=name, url=f"/topics/{web_quote(name)}",
                  mode=mode, partition=partition, limit=limit, offset=offset,
                  timestamp=q.get("timestamp", ""), needle=needle, **result)


@routes.post("/topics/{name}/messages")
async def produce(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    data = await form(request)
    url = f"/topics/{web_quote(name)}/messages"
    key = data.get("key", "").encode() or None
    value = data.get("value", "").encode()
    headers: list[tuple[str, bytes | None]] = []
    for line in filter(None, (x.strip() for x in data.get("headers", "").splitlines())):
        k, sep, v = line.partition("=")
        if not sep:
            raise BadForm(f"headers are NAME=VALUE lines, not {line[:60]!r}")
        headers.append((k.strip(), v.strip().encode()))
    chosen = int_field(data, "partition", -1, low=-1)

    async def send(client: KafkaClient) -> tuple[int, int]:
        leaders = await client.partitions(name)
        if chosen >= 0:
            partition = chosen
        elif key is not None:
            partition = partition_for_key(key, len(leaders))
        else:
            partition = random.choice(sorted(leaders))
        if partition not in leaders:
            raise BadForm(f"{name} has no partition {partition}")
        batch = build_batch([Record(0, int(time.time() * 1000), key, value, tuple(headers))])
        return partition, await client.produce(name, partition, leaders[partition], batch)

    try:
        partition, offset = await console(request).run(send)
    except KafkaError as exc:
        raise back(url, error=f"producing to {name}: {exc}") from None
    raise back(url, ok=f"produced to {name}-{partition} at offset {offset}")


@routes.get("/topics/{name}/tail")
async def tail(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    state = console(request)
    if state.tails >= MAX_TAILS:
        raise web.HTTPServiceUnavailable(
            text=f"{MAX_TAILS} live tails are open already: close one and try again")
    state.tails += 1  # before any await: concurrent requests see it
    try:
        client = await state.new_client()
    except BaseException:
        state.tails -= 1
        raise
    try:
        leaders = await client.partitions(name)
        positions = await client.list_offsets(
            name, {p: n for p, n in leaders.items() if n >= 0}, LATEST)
        positions.update(resume_point(request.headers.get("Last-Event-ID", ""), leaders))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await resp.write(b"retry: 3000\n: tailing\n\n")
        await _stream(request, client, name, leaders, positions, resp)
        return resp
    finally:
        state.tails -= 1
        with contextlib.suppress(Exception):
            await client.close()


def resume_point(last_event_id: str, leaders: dict[int, int]) -> dict[int, int]:
    """``partition:offset`` pairs of a ``Last-Event-ID`` for partitions the
    topic has; anything malformed is ignored (the tail starts at the end)."""
    out: dict[int, int] = {}
    for pair in last_event_id[:MAX_EVENT_ID].split(","):
        p, sep, o = pair.partition(":")
        if sep and p.isdigit() and o.isdigit() and int(p) in leaders:
            out[int(p)] = int(o)
    return out


def event_id(positions: dict[int, int]) -> str:
    text = ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))
    return text if len(text) <= MAX_EVENT_ID else ""


async def _stream(request: web.Request, client: KafkaClient, topic: str,
                  leaders: dict[int, int], positions: dict[int, int],
                  resp: web.StreamResponse) -> None:
    """Records from ``positions`` on, as SSE events, until :data:`TAIL_MAX_S`
    pass or the browser goes away (a write then raises)."""
    deadline = time.monotonic() + TAIL_MAX_S
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if request.transport is None or request.transport.is_closing():
                return  # the browser left while no record came
            sent = False
            for node in {n for n in leaders.values() if n >= 0}:
                parts = {p: positions[p] for p, n in leaders.items()
                         if n == node and p in positions}
                if not parts:
                    continue
                try:
                    records, _ = await client.fetch(topic, node, parts, max_wait_ms=500)
                except (KafkaError, ClientError):  # a leader moved: where is it now?
                    await asyncio.sleep(0.5)
                    leaders = await client.partitions(topic)
                    fresh = {p: n for p, n in leaders.items() if n >= 0 and p not in positions}
                    if fresh:
                        positions.update(await client.list_offsets(topic, fresh, EARLIEST))
                    break
                for p, recs in records.items():
                    for r in recs:
                        positions[p] = r.offset + 1
                        await resp.write(f"id: {event_id(positions)}\n"
                                         f"data: {json.dumps(shown(p, r))}\n\n".encode())
                        sent = True
            if sent:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > KEEPALIVE_S:
                await resp.write(b": keep-alive\n\n")
                quiet_since = time.monotonic()
        await resp.write(b"event: end\ndata: {}\n\n")
    except ConnectionResetError:
        return  # the browser left (aiohttp's "cannot write to closing transport")

"""``/groups`` and ``/groups/{id}``: state, members, assignment, lag per
partition with a chart of the sampled history, and resetting offsets.

A reset commits new offsets for one topic's partitions (earliest, latest,
an offset, or the first offset at a timestamp; clamped to the log's range)
as a standalone commit, which Kafka allows only while the group has no
members: an active group is refused here with the state that blocks it, as
Kafka's ``kafka-consumer-groups.sh`` does, and any refusal of the commit
itself is shown as Kafka gave it.
"""

from __future__ import annotations

from datetime import datetime

from aiohttp import web

from odradek.client.client import EARLIEST, LATEST, KafkaClient
from odradek.client.connection import KafkaError
from odradek.client.groups import commit_offsets, describe_group, list_groups
from odradek.console.charts import line_chart
from odradek.console.lag import group_lag
from odradek.console.web import BadForm, back, console, field, form, int_field, render, web_quote
from odradek.wire.errors import ErrorCode

routes = web.RouteTableDef()
RESETS = ("earliest", "latest", "offset", "timestamp")
MAX_CHARTED_PARTITIONS = 12
"""Past this many partitions the lag chart draws the total only."""


@routes.get("/groups")
async def groups(request: web.Request) -> web.Response:
    listed = await console(request).run(list_groups)
    history = console(request).lag_history
    rows = [{"id": g, "protocol_type": t or "-", "state": s or "-",
             "lag": history[g][-1].total if history.get(g) else None}
            for g, t, s in listed]
    return render(request, "groups.html", groups=rows)


@routes.get("/groups/{group}")
async def group(request: web.Request) -> web.Response:
    gid = request.match_info["group"]
    desc, rows = await console(request).run(lambda c: group_lag(c, gid))
    if desc.state == "Dead" and not rows:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {gid!r} does not exist")
    history = list(console(request).lag_history.get(gid, ()))
    keys = sorted({k for s in history for k in s.partitions})
    per_partition = {f"{t}-{p}": [(s.at, float(s.partitions[(t, p)])) for s in history
                                  if (t, p) in s.partitions]
                     for t, p in keys} if len(keys) <= MAX_CHARTED_PARTITIONS else {}
    chart = line_chart("Total lag", [(s.at, float(s.total)) for s in history], per_partition)
    topics = sorted({r.topic for r in rows} | {t for m in desc.members for t in m.assignment})
    return render(request, "group.html", group=desc, gid=gid, rows=rows, lag_chart=chart,
                  topics=topics, url=f"/groups/{web_quote(gid)}",
                  total=sum(r.lag or 0 for r in rows), resets=RESETS)


async def plan(client: KafkaClient, topic: str, mode: str, offset: int,
               timestamp: int) -> dict[int, int]:
    leaders = await client.partitions(topic)
    starts = await client.list_offsets(topic, leaders, EARLIEST)
    ends = await client.list_offsets(topic, leaders, LATEST)
    if mode == "earliest":
        targets = starts
    elif mode == "latest":
        targets = ends
    elif mode == "offset":
        targets = dict.fromkeys(leaders, offset)
    else:
        at = await client.list_offsets(topic, leaders, timestamp)
        targets = {p: at[p] if at[p] >= 0 else ends[p] for p in leaders}
    return {p: min(max(targets[p], starts[p]), ends[p]) for p in sorted(leaders)}


@routes.post("/groups/{group}/reset")
async def reset(request: web.Request) -> web.StreamResponse:
    gid = request.match_info["group"]
    url = f"/groups/{web_quote(gid)}"
    data = await form(request)
    topic = field(data, "topic")
    mode = field(data, "to")
    if mode not in RESETS:
        raise BadForm(f"'to' is one of {', '.join(RESETS)}")
    offset = int_field(data, "offset", low=0) if mode == "offset" else 0
    timestamp = 0
    if mode == "timestamp":
        try:
            timestamp = int(datetime.fromisoformat(field(data, "timestamp")).timestamp() * 1000)
        except ValueError:
            raise BadForm("'timestamp' is a date and time: 2026-01-31T12:00") from None

    async def run(client: KafkaClient) -> dict[int, int]:
        desc = await describe_group(client, gid)
        if desc.members:
            raise KafkaError(0, f"group {gid} is {desc.state} with {len(desc.members)} "
                                f"member(s): offsets can be reset only while it has none")
        offsets = await plan(client, topic, mode, offset, timestamp)
        await commit_offsets(client, gid, topic, offsets)
        return offsets

    try:
        offsets = await console(request).run(run)
    except KafkaError as exc:
        message = str(exc).removeprefix("NONE: ")
        raise back(url, error=f"resetting {topic}: {message}") from None
    shown = ", ".join(f"{p}→{o}" for p, o in offsets.items())
    raise back(url, ok=f"reset {topic} to {mode}: {shown}")

"""``/topics`` and ``/topics/{name}``: list, create, describe (partitions with
leaders, ISR, sizes and offsets; configs with their sources), delete, add
partitions and edit configs, each through the admin protocol."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from odradek.client import admin
from odradek.client.client import EARLIEST, LATEST, KafkaClient
from odradek.client.connection import ClientError, KafkaError, check
from odradek.console.overview import partition_state
from odradek.console.web import BadForm, back, console, field, form, int_field, render, web_quote
from odradek.wire.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)

routes = web.RouteTableDef()
MAX_CONFIG_LINES = 100


def topic_url(name: str) -> str:
    return f"/topics/{web_quote(name)}"


@routes.get("/topics")
async def topics(request: web.Request) -> web.Response:
    meta = await console(request).run(lambda c: c.metadata(None))
    rows = sorted(({
        "name": t.name or "", "internal": t.is_internal, "partitions": len(t.partitions),
        "replication": max((len(p.replica_nodes) for p in t.partitions), default=0),
        "under_replicated": sum(
            1 for p in t.partitions
            if partition_state(p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) != "ok"),
    } for t in meta.topics), key=lambda r: (r["internal"], r["name"]))
    return render(request, "topics.html", topics=rows)


def _configs(text: str) -> dict[str, str]:
    """KEY=VALUE lines (blank lines skipped)."""
    out = {}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_CONFIG_LINES:
        raise BadForm(f"at most {MAX_CONFIG_LINES} configs")
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadForm(f"configs are KEY=VALUE lines, not {line[:60]!r}")
        out[key.strip()] = value.strip()
    return out


@routes.post("/topics")
async def create(request: web.Request) -> web.StreamResponse:
    data = await form(request)
    name = field(data, "name")
    partitions = int_field(data, "partitions", -1)
    replication = int_field(data, "replication_factor", -1)
    configs = _configs(data.get("configs", ""))
    try:
        await console(request).run(
            lambda c: admin.create_topic(c, name, partitions, replication, configs))
    except KafkaError as exc:
        raise back("/topics", error=f"creating {name}: {exc}") from None
    raise back(topic_url(name), ok=f"created topic {name}")


async def _describe(client: KafkaClient, name: str) -> dict[str, Any]:
    meta = await client.metadata([name])
    (t,) = meta.topics
    check(t.error_code, f"topic {name!r}")
    leaders = {p.partition_index: p.leader_id for p in t.partitions}
    live = {p: node for p, node in leaders.items() if node >= 0}
    starts = await client.list_offsets(name, live, EARLIEST) if live else {}
    ends = await client.list_offsets(name, live, LATEST) if live else {}
    sizes = await _sizes(client, name, sorted(leaders))
    configs = (await admin.describe_configs(client, admin.TOPIC_RESOURCE, [name]))[name]
    partitions: list[dict[str, Any]] = [{
        "partition": p.partition_index, "leader": p.leader_id,
        "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
        "state": partition_state(p.leader_id, list(p.replica_nodes), list(p.isr_nodes)),
        "start": starts.get(p.partition_index), "end": ends.get(p.partition_index),
        "size": sizes.get((p.leader_id, p.partition_index)),
    } for p in sorted(t.partitions, key=lambda p: p.partition_index)]
    return {"name": name, "topic_id": str(t.topic_id), "internal": t.is_internal,
            "partitions": partitions, "configs": configs,
            "messages": sum((p["end"] or 0) - (p["start"] or 0) for p in partitions)}


async def _sizes(client: KafkaClient, topic: str,
                 partitions: list[int]) -> dict[tuple[int, int], int]:
    """(broker, partition) -> bytes on that broker's disk (DescribeLogDirs)."""
    out: dict[tuple[int, int], int] = {}
    meta = await client.metadata([])
    for broker in meta.brokers:
        try:
            conn = await client.node(broker.node_id)
            resp = await conn.request(DescribeLogDirsRequest(topics=[
                DescribableLogDirTopic(topic=topic, partitions=partitions)]), 4, 1)
        except (ClientError, KafkaError, OSError):
            continue  # a broker down: its sizes are not shown
        for result in resp.results:
            for t in result.topics:
                for p in t.partitions:
                    key = (broker.node_id, p.partition_index)
                    out[key] = out.get(key, 0) + p.partition_size
    return out


@routes.get("/topics/{name}")
async def topic(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    described = await console(request).run(lambda c: _describe(c, name))
    return render(request, "topic.html", topic=described, url=topic_url(name))


@routes.post("/topics/{name}/delete")
async def delete(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    data = await form(request)
    if field(data, "confirm") != name:
        raise back(topic_url(name), error="type the topic's name to confirm its deletion")
    try:
        await console(request).run(lambda c: admin.delete_topics(c, [name]))
    except KafkaError as exc:
        raise back(topic_url(name), error=f"deleting {name}: {exc}") from None
    raise back("/topics", ok=f"deleted topic {name}")


@routes.post("/topics/{name}/partitions")
async def add_partitions(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    count = int_field(await form(request), "count", low=1)
    try:
        await console(request).run(lambda c: admin.create_partitions(c, name, count))
    except KafkaError as exc:
        raise back(topic_url(name), error=f"adding partitions: {exc}") from None
    raise back(topic_url(name), ok=f"{name} now has {count} partitions")


@routes.post("/topics/{name}/config")
async def set_config(request: web.Request) -> web.StreamResponse:
    """Set ``key`` to ``value``; with ``delete`` set, return ``key`` to its default."""
    name = request.match_info["name"]
    data = await form(request)
    key = field(data, "key")
    removing = bool(data.get("delete"))
    value = "" if removing else field(data, "value")
    try:
        await console(request).run(lambda c: admin.alter_configs(
            c, admin.TOPIC_RESOURCE, name, {} if removing else {key: value},
            [key] if removing else []))
    except KafkaError as exc:
        raise back(topic_url(name), error=f"altering {key}: {exc}") from None
    raise back(topic_url(name),
               ok=f"{key} back to its default" if removing else f"set {key}={value}")

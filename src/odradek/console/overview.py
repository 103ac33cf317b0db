"""``/``: the cluster's id, brokers and racks, controller and quorum, topics
and partitions by state, and (with ``--metrics-url``) charts of the brokers'
own metrics."""

from __future__ import annotations

from collections import Counter
from typing import Any

from aiohttp import web

from odradek.client.admin import describe_cluster, describe_quorum
from odradek.client.client import KafkaClient
from odradek.console import metrics
from odradek.console.charts import line_chart
from odradek.console.web import console, render

routes = web.RouteTableDef()


def partition_state(leader: int, replicas: list[int], isr: list[int]) -> str:
    """offline (no live leader), under-replicated (ISR smaller than the replicas), or ok."""
    if leader < 0:
        return "offline"
    return "under-replicated" if len(isr) < len(replicas) else "ok"


@routes.get("/")
async def overview(request: web.Request) -> web.Response:
    async def gather(client: KafkaClient) -> dict[str, Any]:
        cluster = await describe_cluster(client)
        quorum = await describe_quorum(client)
        meta = await client.metadata(None)
        states: Counter[str] = Counter()
        leaders: Counter[int] = Counter()
        for t in meta.topics:
            for p in t.partitions:
                states[partition_state(p.leader_id, list(p.replica_nodes),
                                       list(p.isr_nodes))] += 1
                leaders[p.leader_id] += 1
        # Brokers name a live broker as the controller (as Kafka's KRaft
        # brokers do); the quorum, where there is one, names the active one.
        controller = quorum.leader if quorum is not None else cluster.controller
        return {"cluster": cluster, "quorum": quorum, "controller": controller,
                "topics": len(meta.topics),
                "internal": sum(1 for t in meta.topics if t.is_internal),
                "states": {s: states.get(s, 0) for s in ("ok", "under-replicated", "offline")},
                "leaders": leaders}

    data = await console(request).run(gather)
    history = list(console(request).metric_history)
    charts = [line_chart(title, metrics.rates(history, key)) for key, title in (
        ("messages_in", "Messages in / s"), ("bytes_in", "Bytes in / s"),
        ("bytes_out", "Bytes out / s"), ("under_replicated", "Under-replicated partitions"))]
    return render(request, "overview.html", **data, charts=charts,
                  metrics_urls=console(request).metrics_urls,
                  metric_errors=history[-1].errors if history else [])

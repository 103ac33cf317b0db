"""What the group handlers share: finding the coordinator's shell."""

from __future__ import annotations

import uuid

from odradek.broker.net.context import RequestContext
from odradek.broker.ports import GroupPort
from odradek.metadata import features


async def group_runtime(ctx: RequestContext) -> GroupPort | None:
    """The group coordinator, with ``__consumer_offsets`` created if missing;
    None when it cannot serve (COORDINATOR_NOT_AVAILABLE)."""
    runtime = ctx.groups
    if not await runtime.ensure_topic():
        return None
    return runtime


def consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """KIP-848's consumer protocol is served: ``group.version`` >= 1 is finalized
    and ``group.coordinator.rebalance.protocols`` names ``consumer``, as
    Kafka's brokers decide (else its RPCs answer UNSUPPORTED_VERSION)."""
    protocols = {p.strip().lower() for p in
                 ctx.broker.config.get("group.coordinator.rebalance.protocols").split(",")}
    return "consumer" in protocols and features.consumer_protocol_enabled(ctx.broker.image)


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it in group descriptions: ``/ip``."""
    return "/" + ctx.client_host.rsplit(":", 1)[0]


def cluster_topics(ctx: RequestContext) -> dict[str, tuple[uuid.UUID, int]]:
    """Every topic of the metadata: name -> (id, partition count) (what a KIP-848
    consumer group's subscriptions and assignments are resolved against)."""
    return {name: (t.topic_id, len(t.partitions))
            for name, t in ctx.broker.image.topics.items()}

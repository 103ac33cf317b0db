"""What the group handlers share: finding the coordinator's shell."""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.groups import GroupRuntime


async def group_runtime(ctx: RequestContext) -> GroupRuntime | None:
    """The group coordinator, with ``__consumer_offsets`` created if missing;
    None when it cannot serve (COORDINATOR_NOT_AVAILABLE)."""
    runtime = ctx.broker.groups
    if runtime is None or not await runtime.ensure_topic():
        return None
    return runtime


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it in group descriptions: ``/ip``."""
    return "/" + ctx.client_host.rsplit(":", 1)[0]

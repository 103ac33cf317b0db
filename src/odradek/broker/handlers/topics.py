"""Topic operations shared by several handlers."""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.ports import MetadataPort, NotControllerError
from odradek.metadata import controller
from odradek.metadata.controller import ALLOW_INTERNAL_CHANGES, INTERNAL_TOPICS

__all__ = ["INTERNAL_TOPICS", "auto_create", "protect_internal"]


def protect_internal(state: MetadataPort) -> bool:
    """Are internal topics protected from deletion and data-dropping changes
    (unless the broker runs with ``odradek.allow.internal.topic.changes``)?"""
    return not state.config.get_bool(ALLOW_INTERNAL_CHANGES)


async def auto_create(ctx: RequestContext, name: str) -> bool:
    """Create ``name`` with the broker's defaults if auto-creation is on.

    ``__consumer_offsets`` is created by the group coordinator, with its own
    partition count and configs, whatever ``auto.create.topics.enable`` says
    (as Kafka does); other internal topics are never auto-created here."""
    state = ctx.broker
    if name == "__consumer_offsets":
        return await ctx.groups.ensure_topic()
    if name in INTERNAL_TOPICS or not state.config.get_bool("auto.create.topics.enable"):
        return False
    try:
        outcome = await state.write(lambda image: controller.create_topic(
            image, name, -1, state.config.get_int("default.replication.factor"), {},
            node_id=state.node_id,
            default_partitions=state.config.get_int("num.partitions"),
            topic_id=state.ids.uuid(),
        ))
    except NotControllerError:
        return await state.create_topic_at_controller(
            name, -1, {}, state.config.get_int("default.replication.factor"))
    return not outcome.error

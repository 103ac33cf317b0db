"""CreatePartitions (key 37), versions 0–3.

Behaviour: grows a topic to ``count`` partitions (never shrinks:
INVALID_PARTITIONS); ``validate_only`` checks without changing anything.

Version notes: v2 is the first flexible version; v3 is the same body.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.acl_checks import ALTER, topic_allowed
from odradek.broker.handlers.topics import protect_internal
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import controller
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.create_partitions_request import CreatePartitionsRequest
from odradek.wire.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "TOPIC"),)


@handler(37, (0, 3), access=ACCESS)
async def handle(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    state = ctx.broker
    results = []
    for topic in request.topics:
        if not topic_allowed(ctx, ALTER, topic.name):
            results.append(CreatePartitionsTopicResult(
                name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="Authorization failed."))
            continue
        outcome = await state.write(partial(
            controller.create_partitions, name=topic.name, count=topic.count,
            node_id=state.node_id, protect_internal=protect_internal(state)),
            apply=not request.validate_only)
        results.append(CreatePartitionsTopicResult(
            name=topic.name, error_code=outcome.error, error_message=outcome.message,
        ))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)

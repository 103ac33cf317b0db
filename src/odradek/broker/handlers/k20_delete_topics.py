"""DeleteTopics (key 20), versions 0–6.

Behaviour: deletes by name (and from v6 by topic id); unknown topics get
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id); with
``delete.topic.enable=false`` every topic gets TOPIC_DELETION_DISABLED.
The committed offsets of a deleted topic are deleted from every group.

Version notes: v5 error messages; v6 topics as (name, id) pairs.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.acl_checks import DELETE, DESCRIBE, topic_allowed
from odradek.broker.handlers.topics import protect_internal
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import controller
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_topics_request import DeleteTopicsRequest
from odradek.wire.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from odradek.wire.primitives import ZERO_UUID

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "TOPIC"), Access("DELETE", "TOPIC"))


@handler(20, (0, 6), access=ACCESS)
async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    state = ctx.broker
    v = ctx.api_version
    wanted = (
        [(t.name, t.topic_id) for t in request.topics]
        if v >= 6 else [(n, ZERO_UUID) for n in request.topic_names]
    )
    enabled = state.config.get_bool("delete.topic.enable")
    results = []
    deleted: set[str] = set()
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
        if name is None:
            name = state.image.by_id.get(topic_id)
            result.name = name
            if name is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                results.append(result)
                continue
        if not (topic_allowed(ctx, DESCRIBE, name) and topic_allowed(ctx, DELETE, name)):
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(result)
            continue
        if not enabled:
            result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
            results.append(result)
            continue
        topic = state.image.topics.get(name)
        outcome = await state.write(partial(controller.delete_topic, name=name,
                                            protect_internal=protect_internal(state)))
        if outcome.error:
            result.error_code = outcome.error
            if v >= 5:
                result.error_message = outcome.message
        else:
            if v >= 6 and topic is not None:
                result.topic_id = topic.topic_id
            deleted.add(name)
        results.append(result)
    if deleted:
        await ctx.groups.topics_deleted(deleted)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

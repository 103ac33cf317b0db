"""CreateTopics (key 19), versions 0–7.

Behaviour: each topic is validated with Kafka's rules (name, partition count,
replication factor against the live brokers, configs) and created by the
controller; ``validate_only`` checks without creating. Without
``assignments`` the controller places the replicas (``num_partitions`` and
``replication_factor`` -1 take ``num.partitions`` and
``default.replication.factor``); manual ``assignments`` name each partition's
replicas (the first is the preferred leader): registered, distinct brokers,
the same count for every partition, else INVALID_REPLICA_ASSIGNMENT.

A cluster's controller that became active less than ``broker.session.timeout.ms``
ago holds a topic whose replication factor exceeds the live brokers until
enough have registered (within the request's timeout): after a (re)start the
brokers register a moment after the controller is elected, and a client's
first CreateTopics should not fail for that.

Version notes: v1 validate_only and error messages; v5 returns partitions,
replication factor and every config with its source; v7 topic ids.
"""

from __future__ import annotations

import asyncio

from odradek.broker.handlers.acl_checks import (
    CREATE,
    DESCRIBE_CONFIGS,
    cluster_allowed,
    topic_allowed,
)
from odradek.broker.handlers.configs import topic_config_entries
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import controller
from odradek.metadata.image import MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from odradek.wire.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)


async def _brokers_may_come(ctx: RequestContext, rf: int, deadline: float) -> bool:
    """Wait (until ``deadline``, loop time) for ``rf`` live brokers while the
    controller is new (brokers are still registering); True if they came."""
    state = ctx.broker
    since_ms = state.metadata.active_since_ms
    if since_ms < 0:  # not a newly elected controller (a single node never is)
        return False
    loop = asyncio.get_running_loop()
    window_s = (since_ms + state.config.get_int("broker.session.timeout.ms")
                - state.clock.monotonic_ms()) / 1000
    deadline = min(deadline, loop.time() + window_s)
    while loop.time() < deadline:
        if state.image.live_brokers() >= rf:
            return True
        await asyncio.sleep(0.05)
    return state.image.live_brokers() >= rf


async def _create(
    ctx: RequestContext, topic: CreatableTopic, validate_only: bool, deadline: float,
) -> CreatableTopicResult:
    state = ctx.broker
    version = ctx.api_version
    result = CreatableTopicResult(name=topic.name, error_code=0, error_message=None)
    partitions, rf = topic.num_partitions, topic.replication_factor
    assignments: list[list[int]] | None = None
    if topic.assignments:
        if partitions != -1 or rf != -1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                "Both numPartitions or replicationFactor and replicasAssignments were set."
            )
            return result
        ordered = sorted(topic.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            result.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
            result.error_message = "Partitions must be numbered 0..n-1 with none missing."
            return result
        assignments = [list(a.broker_ids) for a in ordered]
    if rf == -1 and assignments is None:
        rf = state.config.get_int("default.replication.factor")
    configs = {c.name: c.value for c in topic.configs}

    def decide(image: MetadataImage) -> Outcome:
        return controller.create_topic(
            image, topic.name, partitions, rf, configs, node_id=state.node_id,
            default_partitions=state.config.get_int("num.partitions"),
            topic_id=state.ids.uuid(), assignments=assignments)

    outcome = await state.write(decide, apply=not validate_only)
    if (outcome.error == ErrorCode.INVALID_REPLICATION_FACTOR and rf > 0
            and await _brokers_may_come(ctx, rf, deadline)):
        outcome = await state.write(decide, apply=not validate_only)
    if outcome.error:
        result.error_code = outcome.error
        result.error_message = outcome.message if version >= 1 else None
        return result
    if version >= 5:
        created = state.image.topics.get(topic.name)
        overrides = created.configs if created else {k: v for k, v in configs.items() if v}
        result.num_partitions = len(created.partitions) if created else (
            partitions if partitions != -1 else state.config.get_int("num.partitions")
        )
        result.replication_factor = (
            len(next(iter(created.partitions.values())).replicas)
            if created and created.partitions else rf)
        result.configs = [
            CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=False,
                config_source=e.source, is_sensitive=False,
            )
            for e in topic_config_entries(overrides, state.config)
        ]
        if created and version >= 7:
            result.topic_id = created.topic_id
    return result


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("CREATE", "CLUSTER", "else CREATE on the topic"),
    Access("DESCRIBE_CONFIGS", "TOPIC", "configs in the answer"),
)


@handler(19, (0, 7), access=ACCESS)
async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    seen: set[str] = set()
    results = []
    deadline = asyncio.get_running_loop().time() + max(request.timeout_ms, 0) / 1000
    for topic in request.topics:
        if topic.name in seen:
            results.append(CreatableTopicResult(
                name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                error_message="Duplicate topic in request." if ctx.api_version >= 1 else None,
            ))
            continue
        seen.add(topic.name)
        if not (cluster_allowed(ctx, CREATE) or topic_allowed(ctx, CREATE, topic.name)):
            results.append(CreatableTopicResult(
                name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="Authorization failed." if ctx.api_version >= 1 else None))
            continue
        result = await _create(ctx, topic, request.validate_only, deadline)
        if not result.error_code and not topic_allowed(ctx, DESCRIBE_CONFIGS, topic.name):
            result.configs = None
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)

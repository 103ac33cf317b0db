"""DescribeTopicPartitions (key 75), version 0.

Behaviour (Kafka 4.0's, KIP-966): the named topics, or every topic when the
list is empty, in name order and each once, with topic id, is_internal and
partitions (leader, leader epoch, replicas, ISR, eligible leader replicas and
last known ELR, both empty here as there is no ELR, and offline replicas: those
on a broker that is not registered or is fenced). The leader is -1 when its
broker is not registered. Partition error codes are always 0.

Pagination: at most ``response_partition_limit`` partitions are answered,
clamped to 1..2000 (Kafka's ``max.request.partition.size.limit``, default
2000). The answer starts at ``cursor`` (topics whose name sorts before the
cursor's topic are skipped; the cursor's topic starts at its partition index).
When the limit cuts the answer, ``next_cursor`` names the first topic and
partition not answered (a next topic starts at partition 0, whether or not it
exists). A named topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION (an
illegal name INVALID_TOPIC_EXCEPTION), zero topic id and no partitions, and
costs nothing of the limit; it is never created. When all topics are asked for,
none can be unknown. A cursor whose topic is not among the named topics, or
whose partition index is negative, is INVALID_REQUEST for every named topic,
as Kafka answers it (no topics when all were asked for).

Topic authorized operations are not computed (-2^31), as in the other handlers:
Odradek has no ACLs. Kafka fills them in on every answer (with no authorizer,
every operation a topic supports).

Version notes: v0 only (flexible).
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.broker.handlers.acl_checks import DESCRIBE, topic_allowed
from odradek.broker.handlers.topics import INTERNAL_TOPICS
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import MetadataPort
from odradek.metadata.controller import topic_name_error
from odradek.metadata.image import TopicImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from odradek.wire.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

MAX_PARTITIONS = 2000
"""Kafka's ``max.request.partition.size.limit`` default: the most partitions one
answer holds, whatever the request asks for."""


def _partitions(
    state: MetadataPort, topic: TopicImage, start: int, count: int
) -> list[DescribeTopicPartitionsResponsePartition]:
    brokers = state.image.brokers
    out = []
    for index in range(start, min(len(topic.partitions), start + count)):
        p = topic.partitions[index]
        out.append(DescribeTopicPartitionsResponsePartition(
            error_code=0,
            partition_index=index,
            leader_id=p.leader if p.leader in brokers else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=[r for r in p.replicas if state.endpoint_of(r) is None],
        ))
    return out


def _invalid(request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
        DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.INVALID_REQUEST, name=t.name, is_internal=False, partitions=[],
        )
        for t in request.topics
    ])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "TOPIC"),)


@handler(75, (0, 0), access=ACCESS)
async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    state = ctx.broker
    image = state.image
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    all_topics = not request.topics
    names: Iterable[str] = image.topics if all_topics else {t.name for t in request.topics}
    if all_topics and ctx.authz.enabled:  # the ones it may not describe are left out
        names = [n for n in names if topic_allowed(ctx, DESCRIBE, n)]
    wanted = sorted(name for name in names if name >= first)
    if cursor is not None and (
        cursor.partition_index < 0 or (not all_topics and cursor.topic_name not in wanted)
    ):
        return _invalid(request)

    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for name in wanted:
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        t = image.topics.get(name)
        if not topic_allowed(ctx, DESCRIBE, name):
            topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[]))
            continue
        if t is None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=error, name=name, is_internal=name in INTERNAL_TOPICS, partitions=[],
            ))
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        partitions = _partitions(state, t, start, remaining)
        topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=t.topic_id,
            is_internal=name in INTERNAL_TOPICS, partitions=partitions,
        ))
        end = start + remaining
        if end < len(t.partitions):
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, topics=topics, next_cursor=next_cursor,
    )

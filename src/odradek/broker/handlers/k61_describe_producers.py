"""DescribeProducers (key 61), version 0: the active producers of partitions.

Behaviour: for each partition this node holds, every producer in its
producer-state table (Kafka's ``UnifiedLog.activeProducers``): producer id,
current epoch, last sequence (-1 when no batch of the current epoch is
remembered), timestamp of its last batch or marker, the coordinator epoch of
its last marker (-1 before any) and the first offset of its open transaction
on the partition (-1: none). A partition of an unknown topic, or beyond its
partition count, gets UNKNOWN_TOPIC_OR_PARTITION; one that exists but is not
held here NOT_LEADER_OR_FOLLOWER, as Kafka answers. Producers are listed by
producer id.

Version notes: v0 is the only version (flexible).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import BY_NAME, READ, denied_topics
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_producers_request import DescribeProducersRequest
from odradek.wire.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    state = ctx.broker
    part = state.partitions.get(topic, index)
    if part is None:
        if topic in state.image.topics and index in state.image.topics[topic].partitions:
            return PartitionResponse(partition_index=index,
                                     error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return PartitionResponse(partition_index=index,
                                 error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message=f"{topic}-{index} does not exist")
    producers = part.state.producers.producers
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, active_producers=[
        ProducerState(
            producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.txn_first_offset,
        )
        for pid, entry in sorted(producers.items())
    ])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "TOPIC"),)


@handler(61, (0, 0), access=ACCESS)
async def handle(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    denied = denied_topics(ctx, READ, request.topics, BY_NAME)
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if t.name in denied else _partition(ctx, t.name, p) for p in t.partition_indexes])
        for t in request.topics
    ])

"""OffsetForLeaderEpoch (key 23), versions 0–4 (KIP-101, KIP-279, KIP-320).

Behaviour: for each partition this broker leads, the largest leader epoch at or
below the one asked and the offset where it ended (the start of the next
epoch, or the log end for the latest), from the leader-epoch cache — what a
consumer checks after a leader change to detect a truncated log, and what a
follower may ask before fetching. Below the first cached epoch: epoch -1,
offset -1. A partition led elsewhere gets NOT_LEADER_OR_FOLLOWER, an unknown
one UNKNOWN_TOPIC_OR_PARTITION; ``current_leader_epoch`` (v2+, -1 skips)
newer than this broker's gets UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH.

Version notes: v1 ``leader_epoch`` in answers; v2 ``current_leader_epoch``; v3
``replica_id``; v4 flexible.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import (
    BY_TOPIC,
    CLUSTER_ACTION,
    DESCRIBE,
    cluster_allowed,
    denied_topics,
)
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.replication.partition import leader_epoch_error
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from odradek.wire.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER", "else DESCRIBE on each topic"),
          Access("DESCRIBE", "TOPIC"))


@handler(23, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest,
                 ) -> OffsetForLeaderEpochResponse:
    state = ctx.broker
    topics = []
    denied = (frozenset() if cluster_allowed(ctx, CLUSTER_ACTION)
              else denied_topics(ctx, DESCRIBE, request.topics, BY_TOPIC))
    for topic in request.topics:
        out = []
        if topic.topic in denied:
            topics.append(OffsetForLeaderTopicResult(topic.topic, [
                EpochEndOffset(ErrorCode.TOPIC_AUTHORIZATION_FAILED, p.partition)
                for p in topic.partitions]))
            continue
        for p in topic.partitions:
            part = state.serving(topic.topic, p.partition)
            if part is None or not part.state.is_leader:
                out.append(EpochEndOffset(
                    state.missing_partition_error(topic.topic, p.partition), p.partition))
                continue
            code = leader_epoch_error(part.state.leader_epoch, p.current_leader_epoch)
            if code:
                out.append(EpochEndOffset(code, p.partition))
                continue
            epoch, end = part.log.epochs.end_offset_for(p.leader_epoch,
                                                        part.state.log_end_offset)
            out.append(EpochEndOffset(0, p.partition, epoch, end))
        topics.append(OffsetForLeaderTopicResult(topic.topic, out))
    return OffsetForLeaderEpochResponse(topics=topics)

"""OffsetCommit (key 8), versions 2–9.

Behaviour: see :mod:`odradek.coordinator.coordinator`. Each partition gets its
own error: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
OFFSET_METADATA_TOO_LARGE past ``offset.metadata.max.bytes``; the committer's
errors (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
FENCED_INSTANCE_ID, COORDINATOR_LOAD_IN_PROGRESS) apply to every partition.
The answer is sent once the records are in ``__consumer_offsets``.

Version notes: v2–4 retention time (an explicit one is stored as the offset's
expire time); v3 throttle time; v5 no retention; v6 committed leader epoch;
v7 group instance id; v8 flexible; v9 (KIP-848) the generation field carries
the member epoch of a consumer group's member (STALE_MEMBER_EPOCH when it is
not the member's current one; a member of a consumer group must use v9+,
UNSUPPORTED_VERSION otherwise). v0–1 (removed in Kafka 4) are not served.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import BY_NAME, READ, denied_topics, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.coordinator import Commit, CommitRequest
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.offset_commit_request import OffsetCommitRequest
from odradek.wire.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)


def _answer(req: OffsetCommitRequest, errors: dict[tuple[str, int], int]) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
            )
            for p in t.partitions
        ])
        for t in req.topics
    ])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("READ", "GROUP"), Access("READ", "TOPIC"))


@handler(8, (2, 9), access=ACCESS)
async def handle(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    version = ctx.api_version
    if not group_allowed(ctx, READ, req.group_id):
        return _answer(req, {(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                             for t in req.topics for p in t.partitions})
    denied = denied_topics(ctx, READ, req.topics, BY_NAME)
    refused: dict[tuple[str, int], int] = {
        (t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for t in req.topics if t.name in denied for p in t.partitions}
    commits = [
        Commit(t.name, p.partition_index, p.committed_offset,
               p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata)
        for t in req.topics if t.name not in denied for p in t.partitions
    ]
    if not commits and refused:
        return _answer(req, refused)
    runtime = await group_runtime(ctx)
    if runtime is None:
        return _answer(req, {**{(c.topic, c.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE
                                for c in commits}, **refused})
    commit = CommitRequest(
        group_id=req.group_id, generation=req.generation_id_or_member_epoch,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if version >= 7 else None,
        retention_ms=req.retention_time_ms if version <= 4 else -1, commits=commits,
        version=version,
    )
    state = ctx.broker
    now = runtime.clock.now_ms()

    def exists(topic: str, p: int) -> bool:  # anywhere in the cluster, not only here
        t = state.image.topics.get(topic)
        return t is not None and p in t.partitions

    try:
        errors = await runtime.call(lambda t: runtime.coordinator.commit_offsets(
            t, now, commit, exists))
    except CoordinatorWriteError:
        errors = {(c.topic, c.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE for c in commits}
    return _answer(req, {**errors, **refused})

"""OffsetFetch (key 9), versions 1–9.

Behaviour: the committed offset, leader epoch and metadata of each asked
partition; -1 and empty metadata for one never committed (and for a group
that does not exist). A null topic list asks for every committed partition.
While the group's ``__consumer_offsets`` partition loads the answer is
COORDINATOR_LOAD_IN_PROGRESS. Only committed offsets are answered: while a
commit of the group is in flight (appended, not yet at the partition's high
watermark) the offsets from before it are. With ``require_stable`` (librdkafka sets it) a
partition whose offset an open transaction committed answers
UNSTABLE_OFFSET_COMMIT, and the client asks again; so does one whose
transaction's marker is written but not committed (the offsets from before
it would otherwise be answered: a consume-transform-produce loop rewinding
after an abort went back past its last committed transaction and
transformed its input twice).

Version notes: v1 from ``__consumer_offsets``; v2 null topics = all, and a
top-level error; v3 throttle time; v5 leader epochs; v6 flexible; v7
require_stable; v8 several groups in one request, errors per group; v9
(KIP-848) a member of a consumer group names itself and its epoch:
UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH when it is not the current one.

Authorization: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED, per
group from v8), then DESCRIBE on each topic: a named partition without it is
answered -1 with TOPIC_AUTHORIZATION_FAILED, an all-topics fetch leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.broker.handlers.acl_checks import BY_TOPIC, DESCRIBE, denied_topics, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.coordinator.coordinator import FetchedOffset
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.offset_fetch_request import OffsetFetchRequest
from odradek.wire.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

Wanted = list[tuple[str, int]] | None


async def _fetch(
    ctx: RequestContext, group_id: str, wanted: Wanted, stable: bool,
    member: tuple[str | None, int] | None = None,
) -> tuple[int, list[FetchedOffset]]:
    if not group_allowed(ctx, DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    runtime = await group_runtime(ctx)
    if runtime is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    # What a write still in flight changed is not shown
    # (docs in broker/coordinators/group_runtime.py).
    code, offsets = runtime.coordinator.fetch_offsets(
        group_id, wanted, stable, member, runtime.committed_offsets(group_id),
        runtime.unstable_offsets(group_id) if stable else ())
    denied = denied_topics(ctx, DESCRIBE, offsets, BY_TOPIC)
    if denied:
        # Named partitions of a topic the principal may not describe: -1 and
        # TOPIC_AUTHORIZATION_FAILED; an all-topics fetch leaves them out.
        offsets = [o if o.topic not in denied else
                   FetchedOffset(o.topic, o.partition, -1, -1, "",
                                 ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                   for o in offsets if wanted is not None or o.topic not in denied]
    return code, offsets


def _by_topic(offsets: Iterable[FetchedOffset]) -> dict[str, list[FetchedOffset]]:
    out: dict[str, list[FetchedOffset]] = {}
    for o in offsets:
        out.setdefault(o.topic, []).append(o)
    return out


async def _single(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    wanted: Wanted = None
    if req.topics is not None:
        wanted = [(t.name, p) for t in req.topics for p in t.partition_indexes]
    code, offsets = await _fetch(ctx, req.group_id, wanted,
                                 ctx.api_version >= 7 and req.require_stable)
    if code and wanted is not None:
        offsets = [FetchedOffset(t, p, -1, -1, "") for t, p in wanted]
    per_partition = code if ctx.api_version < 2 else 0
    topics = [
        OffsetFetchResponseTopic(name=topic, partitions=[
            OffsetFetchResponsePartition(
                partition_index=o.partition, committed_offset=o.offset,
                committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                error_code=per_partition or o.error,
            )
            for o in items
        ])
        for topic, items in _by_topic(offsets).items()
    ]
    return OffsetFetchResponse(topics=topics, error_code=code)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "GROUP"), Access("DESCRIBE", "TOPIC"))


@handler(9, (1, 9), access=ACCESS)
async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version < 8:
        return await _single(ctx, req)
    groups = []
    for g in req.groups:
        wanted: Wanted = None
        if g.topics is not None:
            wanted = [(t.name, p) for t in g.topics for p in t.partition_indexes]
        member = (g.member_id, g.member_epoch) if ctx.api_version >= 9 else None
        code, offsets = await _fetch(ctx, g.group_id, wanted, req.require_stable, member)
        groups.append(OffsetFetchResponseGroup(group_id=g.group_id, error_code=code, topics=[
            OffsetFetchResponseTopics(name=topic, partitions=[
                OffsetFetchResponsePartitions(
                    partition_index=o.partition, committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                    error_code=o.error,
                )
                for o in items
            ])
            for topic, items in _by_topic(offsets).items()
        ]))
    return OffsetFetchResponse(groups=groups)

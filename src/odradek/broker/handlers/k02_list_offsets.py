"""ListOffsets (key 2), versions 1–10.

Behaviour: per partition, timestamp -2 (earliest) gives the log start offset,
-1 (latest) the last fetchable offset (the high watermark, or the last stable
offset under read_committed), -3 (max timestamp, v7) the
offset and timestamp of the record with the largest timestamp, -4 (earliest
local, v8) the local log start offset — with no tiered storage, the log start
offset, as for -2 — and -5 (latest tiered, v9) offset -1, timestamp -1 and
leader epoch -1 with no error, which is what Kafka answers when remote storage
is off for the topic. A timestamp >= 0 gives the first record whose timestamp
is at or after it — offset -1 and timestamp -1 when there is none. A sentinel
newer than the request's version (or below -5) gets UNSUPPORTED_VERSION.
Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION.

In a cluster, a leader whose HW has not yet reached the start of its leader
epoch answers latest (-1) with OFFSET_NOT_AVAILABLE (KIP-207), so a client
never sees an end offset that could move back; ``current_leader_epoch`` (v4+)
is checked as in Fetch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

Version notes: v1 single offset with timestamp; v2 isolation level; v4 leader
epochs; v6 flexible; v7 max timestamp (KIP-734); v8 earliest local timestamp
(KIP-405); v9 latest tiered timestamp (KIP-1005); v10 ``timeout_ms`` (KIP-1075),
the time to wait for remote-storage lookups — nothing here is remote, so every
answer is immediate and the field is ignored.

A leader whose high watermark has not yet reached the start of its leader
epoch (just elected, or just restarted) answers latest (-1) with
OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before), both retriable, as
Kafka does: its HW can lag the one the previous leader gave out, and a client
must not see the latest offset go back.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import BY_NAME, DESCRIBE, denied_topics
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.replication.partition import leader_epoch_error
from odradek.storage.errors import StorageError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from odradek.wire.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from odradek.wire.records import first_record_at_or_after

LATEST = -1


def _lowest_sentinel(version: int) -> int:
    """The lowest sentinel timestamp ``version`` may ask for: -2 earliest, -3 max
    timestamp (v7), -4 earliest local (v8), -5 latest tiered (v9)."""
    if version >= 9:
        return -5
    return -2 - max(0, version - 6)


def _lookup(
    ctx: RequestContext, topic: str, req: ListOffsetsPartition, isolation: int
) -> ListOffsetsPartitionResponse:
    resp = ListOffsetsPartitionResponse(partition_index=req.partition_index, error_code=0)
    part = ctx.broker.serving(topic, req.partition_index)
    if part is None:
        resp.error_code = ctx.broker.missing_partition_error(topic, req.partition_index)
        return resp
    if req.timestamp < _lowest_sentinel(ctx.api_version):
        resp.error_code = ErrorCode.UNSUPPORTED_VERSION
        return resp
    code = (leader_epoch_error(part.state.leader_epoch, req.current_leader_epoch)
            if ctx.api_version >= 4 else 0)
    if not code and req.timestamp == LATEST and not part.state.high_watermark_known:
        # KIP-207: a new leader whose HW has not yet reached the start of its epoch:
        # its HW may be below the one the previous leader gave out (retriable).
        code = (ErrorCode.OFFSET_NOT_AVAILABLE if ctx.api_version >= 5
                else ErrorCode.LEADER_NOT_AVAILABLE)
    if code:
        resp.error_code = code
        return resp
    plog = part.log
    try:
        found = plog.list_offsets(
            req.timestamp, max_offset=part.state.fetchable_offset(isolation),
            record_search=first_record_at_or_after,
        )
    except StorageError as exc:
        resp.error_code = exc.error_code
        return resp
    resp.offset, resp.timestamp = found.offset, found.timestamp
    if ctx.api_version >= 4:
        resp.leader_epoch = found.leader_epoch if found.offset >= 0 else -1
    return resp


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "TOPIC"),)


@handler(2, (1, 10), access=ACCESS)
async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    denied = denied_topics(ctx, DESCRIBE, request.topics, BY_NAME)
    return ListOffsetsResponse(
        throttle_time_ms=0,
        topics=[
            ListOffsetsTopicResponse(t.name, [
                ListOffsetsPartitionResponse(p.partition_index,
                                             ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if t.name in denied else _lookup(ctx, t.name, p, request.isolation_level)
                for p in t.partitions])
            for t in request.topics
        ],
    )

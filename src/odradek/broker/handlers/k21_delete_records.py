"""DeleteRecords (key 21), versions 0–2.

Behaviour: moves each partition's log start offset to the given offset (-1
means the high watermark) and returns it as the low watermark; segments wholly
below it are deleted. An offset above the high watermark gets
OFFSET_OUT_OF_RANGE; unknown partitions UNKNOWN_TOPIC_OR_PARTITION.

Version notes: v2 is flexible.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DELETE, topic_allowed
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.storage.errors import StorageError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_records_request import DeleteRecordsRequest
from odradek.wire.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DELETE", "TOPIC"),)


@handler(21, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            res = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            part = ctx.broker.partitions.get(topic.name, p.partition_index)
            if not topic_allowed(ctx, DELETE, topic.name):
                res.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    res.low_watermark = part.state.delete_records(p.offset)
                except StorageError as exc:
                    res.error_code = exc.error_code
            results.append(res)
        topics.append(DeleteRecordsTopicResult(topic.name, results))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

"""DescribeLogDirs (key 35), versions 1–4.

Behaviour: one log directory (``log.dirs``) holding every partition, with each
partition's size in bytes and an offset lag of 0 (it is the leader's own log).
A null topic list means all topics. v4 adds the volume's total and usable
bytes (``statvfs``).

Version notes: v2 is flexible; v3 adds a top-level error code. v0 was removed
in Kafka 4 and is not served.
"""

from __future__ import annotations

import os

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from odradek.wire.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)


@handler(35, (1, 4))
async def handle(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    state = ctx.broker
    manager = state.partitions
    if request.topics is None:
        wanted = {(t, p) for (t, p) in manager.partitions}
    else:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, index) in sorted(wanted):
        part = manager.get(topic, index)
        if part is None:
            continue
        by_topic.setdefault(topic, []).append(DescribeLogDirsPartition(
            partition_index=index, partition_size=part.log.size_bytes, offset_lag=0,
            is_future_key=False,
        ))
    result = DescribeLogDirsResult(
        error_code=0, log_dir=os.path.abspath(manager.log_dir),
        topics=[DescribeLogDirsTopic(name, parts) for name, parts in by_topic.items()],
    )
    if ctx.api_version >= 4:
        st = os.statvfs(manager.log_dir)
        result.total_bytes = st.f_blocks * st.f_frsize
        result.usable_bytes = st.f_bavail * st.f_frsize
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])

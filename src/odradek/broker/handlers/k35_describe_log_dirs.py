"""DescribeLogDirs (key 35), versions 1–4.

Behaviour: one result per directory of ``log.dirs``, in order, with its
absolute path and the partitions asked for (null: every partition) that have
a log there: the current log of each (size in bytes, offset lag
``max(HW - log end, 0)``, so 0, as Kafka) and, for a partition moving into
that directory (AlterReplicaLogDirs), its future log with ``is_future_key``
true and an offset lag of how far its copy trails the current log's end.
Topics with no partition in a directory are left out of its result. v4 adds
each directory's file system total and usable bytes (``statvfs``:
``f_blocks`` and ``f_bavail`` times ``f_frsize``, as Java's ``FileStore``
total and usable space). The metadata journal's directory is reported only
when it is one of ``log.dirs`` (as Kafka), never the journal itself.

Version notes: v2 is flexible; v3 adds a top-level error code. v0 was removed
in Kafka 4 and is not served.
"""

from __future__ import annotations

import os

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from odradek.wire.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(35, (1, 4), access=ACCESS)
async def handle(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    manager = ctx.broker.partitions
    if request.topics is None:
        wanted = set(manager.partitions)
    else:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = {
        d: {} for d in manager.log_dirs}
    for (topic, index) in sorted(wanted):
        part = manager.get(topic, index)
        if part is None:
            continue
        current = part.log
        by_dir.setdefault(current.parent_dir, {}).setdefault(topic, []).append(
            DescribeLogDirsPartition(
                partition_index=index, partition_size=current.size_bytes,
                offset_lag=max(current.high_watermark - current.log_end_offset, 0),
                is_future_key=False))
        future = part.state.future
        if future is not None:
            by_dir.setdefault(future.log.parent_dir, {}).setdefault(topic, []).append(
                DescribeLogDirsPartition(
                    partition_index=index, partition_size=future.log.size_bytes,
                    offset_lag=future.lag(current), is_future_key=True))
    results = []
    for directory in manager.log_dirs:
        result = DescribeLogDirsResult(
            error_code=0, log_dir=os.path.abspath(directory),
            topics=[DescribeLogDirsTopic(name, parts)
                    for name, parts in by_dir[directory].items()])
        if ctx.api_version >= 4:
            st = os.statvfs(directory)
            result.total_bytes = st.f_blocks * st.f_frsize
            result.usable_bytes = st.f_bavail * st.f_frsize
        results.append(result)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)

"""AlterReplicaLogDirs (key 34), versions 1–2 (Kafka 4.0's range; v0 was removed).

Behaviour: for each partition, move this broker's replica into the named log
directory while it is served (``broker/replica/log_mover.py``): a
``<topic>-<partition>.<hex>-future`` copy is filled in the target directory
and renamed in once it has caught up. The answer comes when the move has
begun, not when it is done (as Kafka); DescribeLogDirs shows the copy with
``is_future_key`` true until then. Naming the directory the replica is in
gives a running move up; naming a third one restarts it there.

Errors per partition, checked in Kafka's order: a topic name too long for the
future directory's name, INVALID_TOPIC_EXCEPTION; a path that is not one of
``log.dirs`` as an absolute path, LOG_DIR_NOT_FOUND; a partition of a topic
the metadata does not know, UNKNOWN_TOPIC_OR_PARTITION; a partition of a known
topic that has no replica on this broker, REPLICA_NOT_AVAILABLE (Kafka keeps
that code here for NOT_LEADER_OR_FOLLOWER); an IO error creating the copy,
KAFKA_STORAGE_ERROR.

Version notes: v2 is flexible.
"""

from __future__ import annotations

import logging
import os

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.storage.errors import StorageError
from odradek.storage.names import partition_dir_name
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from odradek.wire.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

log = logging.getLogger("odradek.broker")

_FUTURE_NAME_EXTRA = len(".") + 32 + len("-future")
"""What a future directory's name adds to ``<topic>-<partition>``."""


def error_response(request: AlterReplicaLogDirsRequest, code: int
                   ) -> AlterReplicaLogDirsResponse:
    """Every partition named refused with ``code``."""
    return AlterReplicaLogDirsResponse(results=[
        AlterReplicaLogDirTopicResult(t.name, [
            AlterReplicaLogDirPartitionResult(p, code) for p in t.partitions])
        for d in request.dirs for t in d.topics])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


@handler(34, (1, 2), error_response=error_response, access=ACCESS)
async def handle(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    state = ctx.broker
    manager = state.partitions
    configured = {os.path.normpath(os.path.abspath(d)): d for d in manager.log_dirs}
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for wanted in request.dirs:
        path = wanted.path
        directory = (configured.get(os.path.normpath(path)) if os.path.isabs(path)
                     else None)
        for topic in wanted.topics:
            for index in topic.partitions:
                code = _alter(ctx, directory, topic.name, index)
                results.setdefault(topic.name, []).append(
                    AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code))
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlterReplicaLogDirTopicResult(name, parts) for name, parts in results.items()])


def _alter(ctx: RequestContext, directory: str | None, topic: str, index: int) -> int:
    state = ctx.broker
    try:
        name_length = len(partition_dir_name(topic, max(index, 0))) + _FUTURE_NAME_EXTRA
    except ValueError:
        name_length = 0
    if name_length > 255:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if directory is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    part = state.partitions.get(topic, index)
    if part is None:
        info = state.image.topics.get(topic)
        if info is not None and index in info.partitions:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        state.partitions.alter_log_dir(part, directory)
    except (StorageError, OSError) as exc:
        log.warning("%s-%d: cannot move to %s: %s", topic, index, directory, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE

"""WriteTxnMarkers (key 27), version 1: append COMMIT/ABORT markers.

Behaviour: for each marker, one control batch (COMMIT when
``transaction_result`` is true, else ABORT; Kafka's format, with the
marker's producer id, epoch and coordinator epoch) is appended to each named
partition through the partition layer with the coordinator origin, and the
answer waits until the high watermark passes it (``acks=all``), as Kafka's
leader does. This is what ``kafka-transactions.sh abort`` sends (KIP-664) to
close a hanging transaction by hand, and what a cluster's transaction
coordinator sends the leaders of partitions it does not lead (those it leads
it writes directly). Per partition: a
partition this node does not hold gets UNKNOWN_TOPIC_OR_PARTITION (or
NOT_LEADER_OR_FOLLOWER when the topic exists elsewhere); an epoch older than
the producer's INVALID_PRODUCER_EPOCH; a coordinator epoch older than the
last marker's TRANSACTION_COORDINATOR_FENCED. A marker that reaches
``__consumer_offsets`` is also handed to the group coordinator, so the
producer's pending transactional offsets apply or go. A marker for a
producer with no open transaction on the partition is written but changes
nothing there.

Version notes: only v1 (flexible, the version Kafka 2.8+ admin clients send)
is served; v0 is not advertised, nor v2 (KIP-1228's ``TransactionVersion``).
"""

from __future__ import annotations

import asyncio

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import PartitionGoneError
from odradek.storage.errors import StorageError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from odradek.wire.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)


async def _write(ctx: RequestContext, marker: WritableTxnMarker, topic: str, index: int) -> int:
    """Append one marker to ``topic``-``index`` and wait for it; the error code."""
    state = ctx.broker
    part = state.partitions.get(topic, index)
    if part is None:
        known = topic in state.image.topics and index in state.image.topics[topic].partitions
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER if known
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    result = ctx.txns.write_marker(part, marker.producer_id, marker.producer_epoch,
                                   bool(marker.transaction_result), marker.coordinator_epoch,
                                   state.clock.now_ms())
    if result.error_code:
        return result.error_code
    try:
        await state.partitions.complete(part, result, acks=-1)
    except PartitionGoneError:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    except StorageError as exc:  # the marker's write failed
        return exc.error_code
    return ErrorCode.NONE


async def _marker(ctx: RequestContext, marker: WritableTxnMarker) -> WritableTxnMarkerResult:
    wanted = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
    # Appended in request order (append_now runs to its first await), then
    # waited on together.
    codes = await asyncio.gather(*(_write(ctx, marker, t, p) for t, p in wanted))
    by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
    for (topic, index), code in zip(wanted, codes, strict=True):
        by_topic.setdefault(topic, []).append(
            WritableTxnMarkerPartitionResult(partition_index=index, error_code=code))
    return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
        WritableTxnMarkerTopicResult(name=t, partitions=r) for t, r in by_topic.items()])


def error_response(request: WriteTxnMarkersRequest, code: int) -> WriteTxnMarkersResponse:
    """Every partition of every marker refused with ``code``."""
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(m.producer_id, [
            WritableTxnMarkerTopicResult(t.name, [
                WritableTxnMarkerPartitionResult(p, code) for p in t.partition_indexes])
            for t in m.topics])
        for m in request.markers])


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"), Access("CLUSTER_ACTION", "CLUSTER"))


@handler(27, (1, 1), error_response=error_response, access=ACCESS)
async def handle(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[await _marker(ctx, m) for m in request.markers])

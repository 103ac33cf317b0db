"""Fetch (key 1), versions 4–17, for consumers and followers.

Behaviour: for each partition, whole batches from the one holding
``fetch_offset`` (clients drop records before it), up to the high watermark,
within ``partition_max_bytes`` and the request's ``max_bytes`` — except that
the first non-empty partition returns at least one whole batch, even a larger
one (KIP-74). The bytes are slices of segment files, written with
``sendfile``. When fewer than ``min_bytes`` are ready the request waits up to
``max_wait_ms`` for an append to any of its partitions (long poll); one
connection's long poll does not hold up others. An offset outside
[log start, log end] gets OFFSET_OUT_OF_RANGE. Fetch sessions are declined
(session id 0 in every response, so clients stay sessionless, KIP-227); a
request naming a session gets FETCH_SESSION_ID_NOT_FOUND. Under
``isolation_level=1`` (read_committed) data stops at the last stable offset
and the answer lists the aborted transactions (producer id, first offset) the
data may hold, so the client can drop their records; under read_uncommitted
the list is null, as Kafka sends it. A ``consumer_byte_rate`` quota is charged the response's
size; a client over it gets an empty answer with ``throttle_time_ms`` and the
connection is muted that long (KIP-219). Only the leader serves a partition
(NOT_LEADER_OR_FOLLOWER elsewhere); ``current_leader_epoch`` (v9+, KIP-320)
newer than the leader's gets UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH.

The replica manager (broker/replica/manager.py) reads, checks, budgets and
long-polls; this handler translates the request and the answer, adds the
leader hints and charges the quota. A fetch with a ``replica_id``
(``replica_state`` from v15) is a follower's: each partition is read up to the log end, not the HW;
the follower's ``last_fetched_epoch`` is checked first, and a log that
diverges is answered with ``diverging_epoch`` and no records; otherwise the
follower's log end is recorded, which may move the HW (and complete acks=all
produces) and make the follower eligible to join the ISR. Followers are not
charged quotas, and their long polls wake on any append. A fetch of
``__cluster_metadata`` goes to the KRaft quorum instead.

Version notes: v4 isolation level and aborted transactions; v5 log start
offset; v7 sessions; v11 rack and preferred read replica; v12 flexible;
v13 topics by id (KIP-516): request and response name topics by ``topic_id``
alone, and the partitions of an id the metadata image does not know (or the
zero id) get UNKNOWN_TOPIC_ID with high watermark -1, as Kafka answers; v14
no change here (OFFSET_MOVED_TO_TIERED_STORAGE needs tiered storage); v15
``replica_state`` replaces ``replica_id`` (KIP-903; its broker epoch is not
checked yet); v16
``node_endpoints`` (KIP-951), the endpoints of the leaders named in partitions
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (whose
``current_leader`` is set from v12 on); v17 the follower's
``replica_directory_id`` (KIP-853), unused.
"""

from __future__ import annotations

from odradek.broker.handlers.leader_hints import LeaderHints
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import METADATA_TOPIC, FetchedPartition, FetchParams, PartitionFetch
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.fetch_request import FetchRequest
from odradek.wire.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("READ", "TOPIC", "a consumer's fetch"),
    Access("CLUSTER_ACTION", "CLUSTER", "a follower's fetch"),
)


@handler(1, (4, 17), access=ACCESS)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    replica_id = max(request.replica_id, request.replica_state.replica_id)
    if replica_id >= 0 and any(t.topic == METADATA_TOPIC for t in request.topics):
        # A voter or observer replicating the metadata log (KRaft), not a consumer.
        response: FetchResponse = await ctx.broker.metadata.serve(1, request)
        return response
    if ctx.api_version >= 7 and request.session_id != 0:
        return FetchResponse(
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    state = ctx.broker
    follower = replica_id >= 0
    broker_epoch = -1
    if follower:
        # The follower's registration as of this fetch (v15+ sends it; before,
        # the one in the image).
        broker = state.image.brokers.get(replica_id)
        broker_epoch = request.replica_state.replica_epoch if ctx.api_version >= 15 else (
            broker.epoch if broker is not None else -1)
    params = FetchParams(replica_id, broker_epoch, request.max_wait_ms, request.min_bytes,
                         request.max_bytes, request.isolation_level)
    # v13+ names topics by id: an id the image does not know is answered here.
    by_id = state.image.by_id if ctx.api_version >= 13 and not follower else None
    names: list[str | None] = []
    wanted: list[PartitionFetch] = []
    for topic in request.topics:
        name: str | None = topic.topic
        if by_id is not None:
            name = by_id.get(topic.topic_id)
        names.append(name)
        if name is not None:
            wanted.extend(PartitionFetch(name, p.partition, p.fetch_offset,
                                         p.partition_max_bytes, p.current_leader_epoch,
                                         p.last_fetched_epoch) for p in topic.partitions)
    result = await ctx.replicas.fetch_records(params, wanted)
    ctx.waited_s += result.waited_s
    answers = iter(result.partitions)
    topics = []
    for topic, name in zip(request.topics, names, strict=True):
        if name is None:
            topics.append(FetchableTopicResponse(topic_id=topic.topic_id, partitions=[
                PartitionData(partition_index=p.partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                              high_watermark=-1, records=b"") for p in topic.partitions]))
            continue
        topics.append(FetchableTopicResponse(
            topic=name, topic_id=topic.topic_id,
            partitions=[_partition(p.partition, next(answers), follower)
                        for p in topic.partitions]))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    if follower:
        return response
    if ctx.api_version >= 12:
        _leader_hints(ctx, response)
    return _charged(ctx, response, result.size)


def _partition(index: int, a: FetchedPartition, follower: bool) -> PartitionData:
    if not a.read:
        return PartitionData(partition_index=index, error_code=a.error_code,
                             high_watermark=-1, records=b"")
    data = PartitionData(
        partition_index=index, error_code=a.error_code, high_watermark=a.high_watermark,
        last_stable_offset=a.last_stable_offset, log_start_offset=a.log_start_offset,
        records=b"" if a.records is None else a.records)
    if follower:
        if a.diverges:
            data.diverging_epoch = EpochEndOffset(a.diverging_epoch, a.diverging_end_offset)
    else:
        data.aborted_transactions = None if a.aborted is None else [
            AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in a.aborted]
    return data


def _leader_hints(ctx: RequestContext, response: FetchResponse) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    carries the leader and epoch of the metadata image in ``current_leader``
    (v12+), and v16+ lists the live leaders' endpoints."""
    hints = LeaderHints(ctx)
    for topic in response.responses:
        for data in topic.partitions:
            if topic.topic and data.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                   ErrorCode.FENCED_LEADER_EPOCH) and (
                    leader := hints.leader(topic.topic, data.partition_index,
                                           endpoint=ctx.api_version >= 16)) is not None:
                data.current_leader = LeaderIdAndEpoch(*leader)
    response.node_endpoints = [NodeEndpoint(n, host, port, None)
                               for n, host, port in hints.endpoints()]


def _charged(ctx: RequestContext, response: FetchResponse, total: int) -> FetchResponse:
    """Charge a ``consumer_byte_rate`` quota. A client already over it gets no
    records, only the throttle time (see broker/net/quotas.py)."""
    quotas = ctx.broker.quotas
    if not total:
        return response
    now_ms = ctx.broker.clock.monotonic_ms()
    due = quotas.pending("consumer_byte_rate", ctx.client_id, now_ms)
    if due:
        ctx.throttle_ms = due
        return FetchResponse(throttle_time_ms=due, error_code=0, session_id=0, responses=[])
    ctx.throttle_ms = quotas.charge("consumer_byte_rate", ctx.client_id, total, now_ms)
    response.throttle_time_ms = ctx.throttle_ms
    return response

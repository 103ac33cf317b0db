"""Fetch (key 1), versions 4–17, for consumers and followers.

Behaviour: the replica manager
(:meth:`~odradek.broker.replica.manager.ReplicaManager.fetch_records`) reads,
checks, budgets and long-polls: whole batches from the one holding
``fetch_offset`` up to the high watermark (a follower: the log end), within
``partition_max_bytes`` and ``max_bytes`` except that the first non-empty
partition returns at least one whole batch (KIP-74); slices of segment files,
written with ``sendfile``; fewer than ``min_bytes`` wait up to ``max_wait_ms``
for an append; an offset outside [log start, log end] is OFFSET_OUT_OF_RANGE;
only the leader serves (NOT_LEADER_OR_FOLLOWER), and ``current_leader_epoch``
(KIP-320) newer than the leader's gets UNKNOWN_LEADER_EPOCH, older
FENCED_LEADER_EPOCH. Under ``isolation_level=1`` data stops at the last stable
offset and the answer lists the aborted transactions it may hold (null under
read_uncommitted, as Kafka sends it). A follower's fetch (``replica_id``, or
``replica_state`` from v15) is checked for divergence first and records the
follower's log end. This handler translates the request and the answer, adds
the leader hints and charges the ``consumer_byte_rate`` quota (not a
follower's): a client over it gets an empty answer with ``throttle_time_ms``
and the connection is muted that long (KIP-219). Fetch sessions are declined
(session id 0 in every response, KIP-227; a request naming one gets
FETCH_SESSION_ID_NOT_FOUND). A replica's fetch of ``__cluster_metadata`` (by
name below v13, by its fixed id ``METADATA_TOPIC_ID`` from v13, as Kafka 4's
KRaft sends it at v17) goes to the KRaft quorum with the request's version.

Version notes: v4 isolation level and aborted transactions; v5 log start
offset; v7 sessions; v11 rack and preferred read replica; v12 flexible;
v13 topics by id (KIP-516): an id the metadata image does not know (or the
zero id) gets UNKNOWN_TOPIC_ID with high watermark -1, as Kafka answers; v14
no change here (OFFSET_MOVED_TO_TIERED_STORAGE needs tiered storage); v15
``replica_state`` (KIP-903); v16 ``node_endpoints`` and from v12
``current_leader`` (KIP-951, :mod:`~odradek.broker.handlers.leader_hints`);
v17 the follower's ``replica_directory_id`` (KIP-853): the Raft leader records a
voter's (``broker/control/quorum_wire.py``); unused for partition data.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import (
    CLUSTER_ACTION,
    READ,
    cluster_allowed,
    denied_topics,
)
from odradek.broker.handlers.leader_hints import fetch_hints
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    FetchedPartition,
    FetchParams,
    PartitionFetch,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.fetch_request import FetchRequest
from odradek.wire.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
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
    if replica_id >= 0 and _metadata_log_fetch(request, ctx.api_version):
        # A voter or observer replicating the metadata log (KRaft), not a consumer.
        if not cluster_allowed(ctx, CLUSTER_ACTION):
            return FetchResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, responses=[])
        response: FetchResponse = await ctx.broker.metadata.serve(1, request, ctx.api_version)
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
    denied = _denied(ctx, follower, names)
    for topic, name in zip(request.topics, names, strict=True):
        if name is not None and name not in denied:
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
        if name in denied:
            topics.append(FetchableTopicResponse(topic=name, topic_id=topic.topic_id, partitions=[
                PartitionData(partition_index=p.partition, high_watermark=-1, records=b"",
                              error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions]))
            continue
        topics.append(FetchableTopicResponse(
            topic=name, topic_id=topic.topic_id,
            partitions=[_partition(p.partition, next(answers), follower)
                        for p in topic.partitions]))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    if follower:
        return response
    if ctx.api_version >= 12:
        fetch_hints(ctx, response)
    return _charged(ctx, response, result.size)


def _metadata_log_fetch(request: FetchRequest, version: int) -> bool:
    """Does a replica's fetch name ``__cluster_metadata``? By id from v13 (the field
    the version has: one comparison a topic, as a fetch by name costs)."""
    if version >= 13:
        return any(t.topic_id == METADATA_TOPIC_ID for t in request.topics)
    return any(t.topic == METADATA_TOPIC for t in request.topics)


def _denied(ctx: RequestContext, follower: bool, names: list[str | None]) -> frozenset[str]:
    """The topics answered TOPIC_AUTHORIZATION_FAILED: a consumer's without READ;
    all of a follower's without CLUSTER_ACTION on the cluster, as Kafka does."""
    if not follower:
        return denied_topics(ctx, READ, names)
    if cluster_allowed(ctx, CLUSTER_ACTION):
        return frozenset()
    return frozenset(n for n in names if n is not None)


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


def _charged(ctx: RequestContext, response: FetchResponse, total: int) -> FetchResponse:
    """Charge a ``consumer_byte_rate`` quota. A client already over it gets no
    records, only the throttle time (see broker/net/quotas.py)."""
    quotas = ctx.broker.quotas
    if not total:
        return response
    now_ms = ctx.broker.clock.monotonic_ms()
    due = quotas.pending("consumer_byte_rate", ctx.client_id, now_ms, user=ctx.user)
    if due:
        ctx.throttle_ms = due
        return FetchResponse(throttle_time_ms=due, error_code=0, session_id=0, responses=[])
    ctx.throttle_ms = quotas.charge("consumer_byte_rate", ctx.client_id, total, now_ms,
                                    user=ctx.user)
    response.throttle_time_ms = ctx.throttle_ms
    return response

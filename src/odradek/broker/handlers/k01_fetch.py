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

A fetch with a ``replica_id`` (``replica_state`` from v15) is a follower's
(``_collect_replica``): each partition is read up to the log end, not the HW;
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

import asyncio

from odradek.broker.handlers.partition_common import epoch_error
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.net.transfer import FileRecords, collect_without_waiting, warm
from odradek.broker.ports import METADATA_TOPIC, PartitionPort
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest
from odradek.wire.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)

MAX_WAIT_MS_CAP = 300_000


def _read(
    part: PartitionPort, req: FetchPartition, budget: int, first: bool, isolation: int
) -> tuple[PartitionData, int]:
    state = part.state
    limit = min(req.partition_max_bytes, budget)
    if limit <= 0 and not first:
        hw = state.high_watermark
        return PartitionData(
            partition_index=req.partition, error_code=0, high_watermark=hw,
            last_stable_offset=state.last_stable_offset,
            log_start_offset=state.log_start_offset, aborted_transactions=None,
            preferred_read_replica=-1, records=b"",
        ), 0
    read = state.read(req.fetch_offset, limit, isolation, min_one_batch=first)
    aborted = None
    if read.aborted is not None:
        aborted = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                   for a in read.aborted]
    data = PartitionData(
        partition_index=req.partition, error_code=read.error_code,
        high_watermark=read.high_watermark, last_stable_offset=read.last_stable_offset,
        log_start_offset=read.log_start_offset, aborted_transactions=aborted,
        preferred_read_replica=-1, records=b"",
    )
    size = read.size
    if size:
        data.records = FileRecords(tuple(read.slices))
    return data, size


def _collect(
    ctx: RequestContext, request: FetchRequest
) -> tuple[FetchResponse, int, list[PartitionPort]]:
    state = ctx.broker
    budget = request.max_bytes if request.max_bytes > 0 else 0
    total = 0
    watched: list[PartitionPort] = []
    topics = []
    by_id = state.image.by_id if ctx.api_version >= 13 else None
    for topic in request.topics:
        out: list[PartitionData] = []
        name = topic.topic
        if by_id is not None:  # v13+: the topic by id
            found = by_id.get(topic.topic_id)
            if found is None:
                out.extend(PartitionData(
                    partition_index=preq.partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    high_watermark=-1, records=b"",
                ) for preq in topic.partitions)
                topics.append(FetchableTopicResponse(topic_id=topic.topic_id, partitions=out))
                continue
            name = found
        for preq in topic.partitions:
            part = state.serving(name, preq.partition)
            if part is None:
                out.append(PartitionData(
                    partition_index=preq.partition,
                    error_code=state.missing_partition_error(name, preq.partition),
                    high_watermark=-1, records=b"",
                ))
                continue
            code = epoch_error(part, preq.current_leader_epoch)
            if code:
                out.append(PartitionData(partition_index=preq.partition, error_code=code,
                                         high_watermark=-1, records=b""))
                continue
            watched.append(part)
            data, size = _read(part, preq, budget - total, total == 0, request.isolation_level)
            total += size
            out.append(data)
        topics.append(FetchableTopicResponse(topic=name, topic_id=topic.topic_id, partitions=out))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    if ctx.api_version >= 12:
        _leader_hints(ctx, response)
    return response, total, watched


def _leader_hints(ctx: RequestContext, response: FetchResponse) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    carries the leader and epoch of the metadata image in ``current_leader``
    (v12+), and v16+ lists the live leaders' endpoints, so clients go there at
    once instead of refreshing metadata first."""
    state = ctx.broker
    endpoints: dict[int, NodeEndpoint] = {}
    for topic in response.responses:
        t = state.image.topics.get(topic.topic) if topic.topic else None
        for data in topic.partitions:
            if data.error_code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                       ErrorCode.FENCED_LEADER_EPOCH) or t is None:
                continue
            p = t.partitions.get(data.partition_index)
            if p is None:
                continue
            data.current_leader = LeaderIdAndEpoch(p.leader, p.leader_epoch)
            if p.leader >= 0 and p.leader not in endpoints and ctx.api_version >= 16:
                e = state.endpoint_of(p.leader)
                if e is not None:
                    endpoints[p.leader] = NodeEndpoint(p.leader, e.host, e.port, None)
    response.node_endpoints = [endpoints[n] for n in sorted(endpoints)]


async def _wait_for_append(parts: list[PartitionPort], timeout_ms: float) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    for part in parts:
        part.waiters.add(fut)
    try:
        await asyncio.wait_for(fut, timeout_ms / 1000)
    except TimeoutError:
        pass
    finally:
        for part in parts:
            part.waiters.discard(fut)


def _collect_replica(
    ctx: RequestContext, request: FetchRequest, replica_id: int
) -> tuple[FetchResponse, int, list[PartitionPort]]:
    """A follower's fetch: each partition read up to the log end, or told where its
    log diverges; the follower's log end recorded (moving the HW, perhaps)."""
    state = ctx.broker
    now_ms = state.clock.now_ms()
    # The follower's registration as of this fetch (v15+ sends it; before, the
    # one in the image): a log end it reported counts for the ISR only while
    # that registration lasts (a restarted follower may have lost its tail).
    broker = state.image.brokers.get(replica_id)
    broker_epoch = request.replica_state.replica_epoch if ctx.api_version >= 15 else (
        broker.epoch if broker is not None else -1)
    budget = request.max_bytes if request.max_bytes > 0 else 0
    total = 0
    watched: list[PartitionPort] = []
    topics = []
    for topic in request.topics:
        out: list[PartitionData] = []
        for preq in topic.partitions:
            part = state.partitions.get(topic.topic, preq.partition)
            code = (ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if part is None or not part.state.is_leader or not state.registered
                    else epoch_error(part, preq.current_leader_epoch))
            if part is None or code:
                out.append(PartitionData(partition_index=preq.partition, error_code=code,
                                         high_watermark=-1, records=b""))
                continue
            watched.append(part)
            limit = min(preq.partition_max_bytes, max(budget - total, 0))
            read = part.state.read_for_follower(replica_id, preq.fetch_offset,
                                                preq.last_fetched_epoch, limit, now_ms,
                                                broker_epoch)
            if read.hw_moved:
                part.hw_moved()
            if read.expand:
                state.partitions.on_isr_eligible()
            data = PartitionData(
                partition_index=preq.partition, error_code=read.error_code,
                high_watermark=read.high_watermark, last_stable_offset=read.high_watermark,
                log_start_offset=read.log_start_offset, records=b"")
            if read.diverging_epoch >= 0 or read.diverging_end_offset >= 0:
                data.diverging_epoch = EpochEndOffset(read.diverging_epoch,
                                                      read.diverging_end_offset)
            elif read.size:
                data.records = FileRecords(tuple(read.slices))
                total += read.size
            out.append(data)
        topics.append(FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id,
                                             partitions=out))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return response, total, watched


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("READ", "TOPIC", "a consumer's fetch"),
    Access("CLUSTER_ACTION", "CLUSTER", "a follower's fetch"),
)


@handler(1, (4, 17), access=ACCESS)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    replica_id = max(request.replica_id, request.replica_state.replica_id)
    if _is_raft_fetch(request):  # the metadata log's own replication
        response: FetchResponse = await ctx.broker.metadata.serve(1, request)
        return response
    if ctx.api_version >= 7 and request.session_id != 0:
        return FetchResponse(
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + min(max(request.max_wait_ms, 0), MAX_WAIT_MS_CAP) / 1000
    while True:
        # The lookups read indexes and batch headers: a thread reads in what is
        # not cached, and the collection runs again (both change nothing before
        # a partition's read).
        if replica_id >= 0:
            response, total, watched = await collect_without_waiting(
                lambda: _collect_replica(ctx, request, replica_id))
        else:
            response, total, watched = await collect_without_waiting(
                lambda: _collect(ctx, request))
        remaining_ms = (deadline - loop.time()) * 1000
        if total >= request.min_bytes or remaining_ms <= 0 or not watched:
            if total:
                await warm([p.records for t in response.responses for p in t.partitions
                            if isinstance(p.records, FileRecords)])
            return response if replica_id >= 0 else _charged(ctx, response, total)
        before = loop.time()
        await _wait_for_append(watched, remaining_ms)
        ctx.waited_s += loop.time() - before


def _is_raft_fetch(request: FetchRequest) -> bool:
    """A voter or observer replicating the metadata log (KRaft), not a consumer."""
    return (request.replica_id >= 0 or request.replica_state.replica_id >= 0) and any(
        t.topic == METADATA_TOPIC for t in request.topics)


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

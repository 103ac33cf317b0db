"""Produce (key 0), versions 3–12 served; 0–2 advertised but rejected.

Behaviour: ``acks`` must be -1, 0 or 1. Each partition's records go to the
replica manager (:meth:`~odradek.broker.replica.manager.ReplicaManager.append_records`,
which says what is refused before anything is appended, and how: a partition
this node does not lead, an internal topic, a batch that fails the scan or
the producer-state check, an ISR below ``min.insync.replicas`` for acks=-1).
The partitions of one request are appended first, then waited for together:
with acks=-1 until the high watermark passes the records, within
``timeout_ms`` (REQUEST_TIMED_OUT). ``acks=0`` gets no response; if such a
request fails, the connection is closed so the client notices, as Kafka does.
A transactional batch is verified first (KIP-890 part 1): unless the
producer's transaction is already open on the partition, the transaction
coordinator must have the partition in the producer's ongoing transaction at
its current epoch, else INVALID_TXN_STATE (or INVALID_PRODUCER_EPOCH). A
``producer_byte_rate`` quota is charged the request's size; over it, the
answer carries ``throttle_time_ms`` and the connection is muted that long.

Version notes: v0–2 (magic 0/1) get UNSUPPORTED_VERSION — advertised because
librdkafka checks for Produce v0 (KAFKA-18659); v3 transactional id and v2
batches; v5 log start offset; v8 record errors and messages; v9 flexible;
v10 leader hints (KIP-951, :mod:`~odradek.broker.handlers.leader_hints`);
v11 TRANSACTION_ABORTABLE (KIP-890) where older versions get
INVALID_TXN_STATE; v12 (KIP-890 part 2) has v11's fields and, with
``transaction.version`` >= 2 finalized, is transactions v2's form: the
partitions of its transactional batches are added to the producer's
transaction by the broker itself before the batches are verified and appended
(:mod:`odradek.broker.coordinators.txn_implicit`, CONCURRENT_TRANSACTIONS
retried there). A batch of an ended transaction (its epoch was bumped by
EndTxn v5) is refused INVALID_PRODUCER_EPOCH, as Kafka maps the coordinator's
PRODUCER_FENCED; a coordinator that cannot be asked now is NOT_ENOUGH_REPLICAS
(retriable, Kafka's mapping). Below v12, or with ``transaction.version`` < 2,
the client adds partitions with AddPartitionsToTxn (transactions v1) and they
are verified only (docs/transactions.md).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Coroutine
from typing import Any

from odradek.broker.handlers.acl_checks import BY_NAME, WRITE, denied_topics, txn_allowed
from odradek.broker.handlers.leader_hints import produce_hints
from odradek.broker.handlers.topics import INTERNAL_TOPICS
from odradek.broker.handlers.txn_common import client_version, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, CloseConnection, Deferred, handler
from odradek.broker.ports import BrokerStopping, PartitionPort, ProduceEntry
from odradek.replication.partition import Appended
from odradek.wire.batch import BATCH_HEADER_SIZE, read_batch_header
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.produce_request import ProduceRequest
from odradek.wire.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)


def error_response(request: ProduceRequest, code: int) -> ProduceResponse:
    return ProduceResponse(responses=[
        TopicProduceResponse(t.name, [
            PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data
        ])
        for t in request.topic_data
    ])


_IMPLICIT_AS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
}
"""A refused implicit add, as a Produce answers it (Kafka's ``ReplicaManager``)."""


async def _add_implicitly(ctx: RequestContext, request: ProduceRequest, entries:
                          list[ProduceEntry], timeout_s: float) -> dict[tuple[str, int], int]:
    """Transactions v2: the partitions of the transactional batches added to the
    producer's transaction; the ones refused, with their Produce error."""
    tid = request.transactional_id
    if tid is None or not client_version(ctx, 12):
        return {}
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for e in entries:
        if e.records is None or len(e.records) < BATCH_HEADER_SIZE:
            continue  # refused by the append's own checks
        header = read_batch_header(e.records)
        topic = ctx.broker.image.topics.get(e.topic)
        if header.is_transactional and topic is not None and e.index in topic.partitions:
            by_producer.setdefault((header.producer_id, header.producer_epoch), []).append(
                (e.topic, e.index))
    if not by_producer:
        return {}
    refused: dict[tuple[str, int], int] = {}
    runtime = await txn_runtime(ctx)
    for (pid, epoch), partitions in by_producer.items():
        if runtime is None:
            refused.update(dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS))
            continue
        codes = await runtime.add_implicitly(tid, pid, epoch, partitions, timeout_s)
        refused.update({tp: _IMPLICIT_AS.get(code, code) for tp, code in codes.items() if code})
    return refused


def _verify(ctx: RequestContext, transactional_id: str | None,
            refused: dict[tuple[str, int], int], producer_id: int,
            producer_epoch: int, partition: tuple[str, int]) -> int:
    """KIP-890's verification of a transactional batch, in this version's terms:
    TRANSACTION_ABORTABLE from v11 where older versions get INVALID_TXN_STATE
    (a partition whose implicit add was refused: that error)."""
    if partition in refused:
        return refused[partition]
    code = ctx.txns.verify_produce(transactional_id, producer_id, producer_epoch, partition)
    if code == ErrorCode.INVALID_TXN_STATE and ctx.api_version >= 11:
        return ErrorCode.TRANSACTION_ABORTABLE
    return code


async def _complete(ctx: RequestContext, part: PartitionPort, resp: PartitionProduceResponse,
                    result: Appended, acks: int, timeout_s: float | None) -> None:
    """Wait for what ``acks`` asks (the replica manager's delayed produce); an
    error replaces the offsets in the answer."""
    try:
        code = await ctx.replicas.completed(part, result, acks, timeout_s)
    except BrokerStopping as exc:  # not answered: the records may be persisted
        raise CloseConnection(str(exc)) from None
    if code:
        resp.error_code, resp.base_offset = code, -1
        resp.error_message = None


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("WRITE", "TOPIC"), Access("WRITE", "TRANSACTIONAL_ID", "a transactional batch"))


@handler(0, (0, 12), rejected_versions=(0, 2), error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: ProduceRequest
                 ) -> ProduceResponse | Deferred | None:
    acks = request.acks
    if acks not in (-1, 0, 1):
        return error_response(request, ErrorCode.INVALID_REQUIRED_ACKS)
    tid = request.transactional_id
    if tid is not None and not txn_allowed(ctx, WRITE, tid):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = denied_topics(ctx, WRITE, request.topic_data, BY_NAME)
    responses = []
    waits: list[Coroutine[Any, Any, None]] = []
    writing = False
    timeout_s = max(request.timeout_ms, 0) / 1000
    await ctx.replicas.ready_to_append(timeout_s)
    entries = [ProduceEntry(topic.name, pdata.index,
                            None if pdata.records is None else memoryview(pdata.records))  # type: ignore[arg-type]
               for topic in request.topic_data if topic.name not in denied
               for pdata in topic.partition_data]
    refused = await _add_implicitly(ctx, request, entries, timeout_s)
    produced = iter(ctx.replicas.append_records(
        entries, acks, INTERNAL_TOPICS,
        functools.partial(_verify, ctx, request.transactional_id, refused),
        ctx.client_id))
    for topic in request.topic_data:
        if topic.name in denied:  # refused before anything else (not even existence)
            responses.append(TopicProduceResponse(topic.name, [
                PartitionProduceResponse(index=p.index, base_offset=-1,
                                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partition_data]))
            continue
        parts = []
        for pdata in topic.partition_data:
            p = next(produced)
            resp = PartitionProduceResponse(
                index=pdata.index, error_code=p.error_code, base_offset=p.base_offset,
                log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
                error_message=p.error_message)
            result = p.result
            # Only what must wait is awaited: an acks=0 append with no fsync due
            # is answered without yielding to the loop, so requests a client
            # pipelined before closing its connection are all taken in order
            # (its write is queued in order; nobody waits for it).
            writing |= result is not None and result.write is not None
            if result is not None and not result.error_code and (
                    acks == -1 or result.flush_due or (acks == 1 and result.write is not None)):
                waits.append(_complete(ctx, p.part, resp, result, acks, timeout_s))
            parts.append(resp)
        responses.append(TopicProduceResponse(topic.name, parts))
    if writing:
        # Every append is assigned and some are being written on the writer
        # threads: the connection serves its next request while this one waits
        # (writes, fsyncs, the HW); its answer keeps its place.
        return Deferred(_answer(ctx, request, responses, waits))
    return await _answer(ctx, request, responses, waits)


async def _answer(ctx: RequestContext, request: ProduceRequest,
                  responses: list[TopicProduceResponse],
                  waits: list[Coroutine[Any, Any, None]]) -> ProduceResponse | None:
    state = ctx.broker
    acks = request.acks
    failed = False
    if waits:
        # What acks asks is waited for, not worked on (the request's RemoteTime;
        # the request quota does not charge it either)
        began = time.perf_counter()
        await asyncio.gather(*waits)
        ctx.waited_s += time.perf_counter() - began
    for topic_resp in responses:
        for resp in topic_resp.partition_responses:
            if ctx.api_version < 8:
                resp.error_message = None
            failed |= resp.error_code != 0
    ctx.throttle_ms = state.quotas.charge(
        "producer_byte_rate", ctx.client_id, ctx.request_size, state.clock.monotonic_ms(),
        user=ctx.user)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    response = ProduceResponse(responses=responses, throttle_time_ms=ctx.throttle_ms)
    if failed and ctx.api_version >= 10:
        response.node_endpoints = produce_hints(ctx, responses)
    return response

"""AddPartitionsToTxn (key 24), versions 0–5: the partitions a transaction
writes to, named before they are written.

Behaviour, per transaction: a partition of an unknown topic gets
UNKNOWN_TOPIC_OR_PARTITION and every other partition of that transaction
OPERATION_NOT_ATTEMPTED, as Kafka answers; otherwise the transaction
coordinator adds them all (the transaction becomes Ongoing) or answers one
error for all: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
CONCURRENT_TRANSACTIONS while a previous transaction completes,
INVALID_TXN_STATE; NOT_COORDINATOR for an id this broker does not coordinate.

Version notes: v0–3 are the client's form (one transaction); v2 allows
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below); v3 flexible. v4+ is the
broker-to-broker form (KIP-890 part 1): a batch of transactions, each with
``verify_only``, answered per transaction (``results_by_transaction``, the
top-level error code 0). ``verify_only`` asks without changing anything
whether the partitions are in the producer's ongoing transaction: NONE or
TRANSACTION_ABORTABLE per partition, or one of INVALID_PRODUCER_ID_MAPPING /
PRODUCER_FENCED / CONCURRENT_TRANSACTIONS for all
(:meth:`~odradek.coordinator.txn.coordinator.TransactionCoordinator.verify_partitions`);
without it the partitions are added as a client's v3 request adds them:
that is how a partition leader adds a transactions v2 producer's partition
(Produce v12, TxnOffsetCommit v5), and with ``transaction.version`` >= 2 a v5
add marks the transaction as a v2 one (``ClientTransactionVersion`` 2). v5
also says the requester knows TRANSACTION_ABORTABLE; Kafka's coordinator
answers it to v4 as well, and so does Odradek. Kafka requires
CLUSTER_ACTION for v4+; Odradek has no authorizer.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import (
    CLUSTER_ACTION,
    FIRST,
    WRITE,
    cluster_allowed,
    denied_topics,
    txn_allowed,
)
from odradek.broker.handlers.txn_common import client_version, fenced_as, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import TxnPort
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from odradek.wire.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

TopicPartition = tuple[str, int]


def _by_topic(codes: dict[TopicPartition, int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=code))
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=r)
            for t, r in by_topic.items()]


def _unknown(image: MetadataImage, wanted: list[TopicPartition]) -> dict[TopicPartition, int]:
    """UNKNOWN_TOPIC_OR_PARTITION for the partitions that do not exist and
    OPERATION_NOT_ATTEMPTED for the rest, if any does not exist; else empty."""
    unknown = {
        tp for tp in wanted
        if tp[0] not in image.topics or tp[1] not in image.topics[tp[0]].partitions
    }
    if not unknown:
        return {}
    return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}


async def _add(
    ctx: RequestContext, runtime: TxnPort, tid: str, producer_id: int, epoch: int,
    wanted: list[TopicPartition], verify_only: bool,
) -> dict[TopicPartition, int]:
    """The error code of each partition of one transaction."""
    if failed := _unknown(ctx.broker.image, wanted):
        return failed
    if err := runtime.coordinator_error(tid):
        return dict.fromkeys(wanted, err)
    if verify_only:
        return {tp: int(code) for tp, code in runtime.coordinator.verify_partitions(
            tid, producer_id, epoch, wanted).items()}
    decision = runtime.coordinator.add_partitions(
        tid, producer_id, epoch, wanted, runtime.clock.now_ms(),
        client_version=client_version(ctx, 5) or -1)
    code = fenced_as(await runtime.run(tid, decision), ctx.api_version, 2)
    return dict.fromkeys(wanted, code)


def _wanted(topics_and_partitions: list[tuple[str, list[int]]]) -> list[TopicPartition]:
    return [(name, p) for name, partitions in topics_and_partitions for p in partitions]


def _refused(ctx: RequestContext, tid: str, wanted: list[TopicPartition]
             ) -> dict[TopicPartition, int] | None:
    """The answer to a client without WRITE on the transactional id (every
    partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or on some of the topics
    (those TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED); None
    when it may add them all."""
    if not txn_allowed(ctx, WRITE, tid):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = denied_topics(ctx, WRITE, wanted, FIRST)
    if not denied:
        return None
    return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
            else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}


async def _batch(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """v4+: each transaction of the batch answered on its own (a broker's
    verification: CLUSTER_ACTION on the cluster)."""
    if not cluster_allowed(ctx, CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    runtime = await txn_runtime(ctx)
    results = []
    for txn in request.transactions:
        wanted = _wanted([(t.name, list(t.partitions)) for t in txn.topics])
        if runtime is None:
            codes: dict[TopicPartition, int] = dict.fromkeys(
                wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            codes = await _add(ctx, runtime, txn.transactional_id, txn.producer_id,
                               txn.producer_epoch, wanted, txn.verify_only)
        results.append(AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                topic_results=_by_topic(codes)))
    return AddPartitionsToTxnResponse(error_code=0, results_by_transaction=results)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("WRITE", "TRANSACTIONAL_ID", "v0-3"), Access("WRITE", "TOPIC", "v0-3"),
          Access("CLUSTER_ACTION", "CLUSTER", "v4+, a broker's batch"))


@handler(24, (0, 5), access=ACCESS)
async def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.api_version >= 4:
        return await _batch(ctx, request)
    wanted = _wanted([(t.name, list(t.partitions)) for t in request.v3_and_below_topics])
    refused = _refused(ctx, request.v3_and_below_transactional_id, wanted)
    if refused is not None:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(refused))
    runtime = await txn_runtime(ctx)
    if runtime is None:
        codes: dict[TopicPartition, int] = dict.fromkeys(
            wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        codes = await _add(ctx, runtime, request.v3_and_below_transactional_id,
                           request.v3_and_below_producer_id,
                           request.v3_and_below_producer_epoch, wanted, verify_only=False)
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(codes))


"""AddPartitionsToTxn (key 24), versions 0–3: a producer names the partitions
its transaction writes to, before it writes.

Behaviour: a partition of an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION and
every other partition of the request OPERATION_NOT_ATTEMPTED, as Kafka
answers; otherwise the transaction coordinator adds them all (the transaction
becomes Ongoing) or answers one error for all: INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED, CONCURRENT_TRANSACTIONS while a previous transaction
completes, INVALID_TXN_STATE.

Version notes: v2 allows PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below); v3
flexible. v4+ (batched, broker-to-broker verification) is not advertised.
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.handlers.txn_common import fenced_as, txn_runtime
from odradek.broker.registry import handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from odradek.wire.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)


def _answer(wanted: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in wanted.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=code))
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=r)
        for t, r in by_topic.items()])


@handler(24, (0, 3))
async def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    runtime = await txn_runtime(ctx)
    if runtime is None:
        return _answer(dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    image = ctx.broker.image
    unknown = {
        tp for tp in wanted
        if tp[0] not in image.topics or tp[1] not in image.topics[tp[0]].partitions
    }
    if unknown:
        return _answer({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                        else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
    tid = request.v3_and_below_transactional_id
    if err := runtime.coordinator_error(tid):
        return _answer(dict.fromkeys(wanted, err))
    decision = runtime.coordinator.add_partitions(
        tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, wanted,
        runtime.clock.now_ms())
    code = fenced_as(await runtime.run(tid, decision), ctx.api_version, 2)
    return _answer(dict.fromkeys(wanted, code))

"""DescribeTransactions (key 65), version 0: what the transaction coordinator
holds for each transactional id.

Behaviour: per id, as Kafka's ``TransactionCoordinator.handleDescribeTransactions``:
the state by its Kafka name (``Empty``, ``Ongoing``, ``PrepareCommit``,
``CompleteAbort``, ...), the transaction timeout, the start time of the
current or last transaction (-1 when none has started), producer id and
epoch, and the partitions of the transaction grouped by topic. An id the
coordinator does not know, or one being expired (``Dead``), gets
TRANSACTIONAL_ID_NOT_FOUND; an empty id INVALID_REQUEST; no coordinator
COORDINATOR_NOT_AVAILABLE. Reading never creates ``__transaction_state``.

Version notes: v0 is the only version (flexible).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE, txn_allowed
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.coordinator.txn.coordinator import TransactionCoordinator, TxnState
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_transactions_request import DescribeTransactionsRequest
from odradek.wire.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)


def _describe(coordinator: TransactionCoordinator | None, tid: str) -> TransactionState:
    if coordinator is None:
        return TransactionState(transactional_id=tid,
                                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not tid:
        return TransactionState(transactional_id=tid, error_code=ErrorCode.INVALID_REQUEST)
    meta = coordinator.transactions.get(tid)
    if meta is None or meta.state is TxnState.DEAD:
        return TransactionState(transactional_id=tid,
                                error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    return TransactionState(
        error_code=ErrorCode.NONE, transactional_id=tid,
        transaction_state=meta.state.kafka_name, transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[TopicData(topic=t, partitions=p) for t, p in by_topic.items()],
    )


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "TRANSACTIONAL_ID"), Access("DESCRIBE", "TOPIC"))


@handler(65, (0, 0), access=ACCESS)
async def handle(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    runtime = ctx.txns
    await runtime.loaded.wait()
    if not await runtime.settled():  # writes in flight did not commit: no dirty read
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
            TransactionState(transactional_id=tid,
                             error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            for tid in request.transactional_ids])
    coordinator = runtime.coordinator
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _describe(coordinator, tid) if txn_allowed(ctx, DESCRIBE, tid) else TransactionState(
            transactional_id=tid, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        for tid in request.transactional_ids])

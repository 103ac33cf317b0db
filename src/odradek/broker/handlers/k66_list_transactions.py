"""ListTransactions (key 66), versions 0–1: the transactions this coordinator holds.

Behaviour: every transactional id the coordinator knows, with its producer
id and state name, filtered as Kafka's ``TransactionStateManager.listTransactionStates``:
by state name (exact Kafka names: ``Empty``, ``Ongoing``, ``PrepareCommit``,
``PrepareAbort``, ``CompleteCommit``, ``CompleteAbort``, ``PrepareEpochFence``;
a name that is none of these is echoed in ``unknown_state_filters`` and
matches nothing), by producer id, and (v1) by duration: with
``duration_filter`` >= 0 only transactions running longer than that many
milliseconds (now minus the start time). Ids being expired (``Dead``) are
left out. No coordinator: COORDINATOR_NOT_AVAILABLE. Listing never creates
``__transaction_state``. Sorted by transactional id.

Version notes: v0 state and producer id filters (flexible); v1 the duration
filter. v2 (KIP-1152's ``TransactionalIdPattern``) is not advertised.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE, txn_allowed
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.coordinator.txn.coordinator import STATE_BY_NAME, TxnState
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.list_transactions_request import ListTransactionsRequest
from odradek.wire.messages.list_transactions_response import (
    ListTransactionsResponse,
    TransactionState,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "TRANSACTIONAL_ID", "each listed"),)


@handler(66, (0, 1), access=ACCESS)
async def handle(
    ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    runtime = ctx.txns
    await runtime.loaded.wait()
    if not await runtime.settled():  # writes in flight did not commit: no dirty read
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    names = list(request.state_filters or ())
    unknown = [n for n in names if n not in STATE_BY_NAME]
    states = {STATE_BY_NAME[n] for n in names if n in STATE_BY_NAME}
    producer_ids = set(request.producer_id_filters or ())
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    now = runtime.clock.now_ms()
    listed = []
    for tid, meta in sorted(runtime.coordinator.transactions.items()):
        if meta.state is TxnState.DEAD:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        if names and meta.state not in states:
            continue
        if duration >= 0 and now - meta.start_ms <= duration:
            continue
        if not txn_allowed(ctx, DESCRIBE, tid):
            continue
        listed.append(TransactionState(transactional_id=tid, producer_id=meta.producer_id,
                                       transaction_state=meta.state.kafka_name))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    unknown_state_filters=unknown, transaction_states=listed)

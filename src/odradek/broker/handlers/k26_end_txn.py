"""EndTxn (key 26), versions 0–5: commit or abort the producer's transaction.

Behaviour: the answer comes once PrepareCommit/PrepareAbort is in
``__transaction_state`` (at or below its HW); the markers follow, and until
they are all written the transactional id answers CONCURRENT_TRANSACTIONS.
While the markers are written any EndTxn answers CONCURRENT_TRANSACTIONS
(Kafka's pending transition). A retry of a finished EndTxn succeeds; the
opposite decision once the transaction is complete, or EndTxn with
no transaction, is INVALID_TXN_STATE; an unknown id or another producer id
INVALID_PRODUCER_ID_MAPPING; an old epoch PRODUCER_FENCED.

Version notes: v2 allows PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below); v3
flexible; v4 (KIP-890) allows TRANSACTION_ABORTABLE, which ending a
transaction never needs. v5 is transactions v2's form: with
``transaction.version`` >= 2 finalized, a v5 EndTxn (commit or abort) bumps the
producer epoch at the prepare step (:mod:`odradek.coordinator.txn.epochs`):
the answer carries the new ``producer_id``/``producer_epoch`` (a new producer
id at epoch 0 when the epoch is exhausted), the markers are written with it,
and a retry with the previous epoch succeeds for the same result. Below v5, or
with ``transaction.version`` < 2, the transaction ends as in transactions v1
and the answer is ``producer_id`` -1, ``producer_epoch`` -1 ("keep your
epoch"), as Kafka answers.
"""

from __future__ import annotations

import logging

from odradek.broker.handlers.acl_checks import WRITE, txn_allowed
from odradek.broker.handlers.producer_ids import ensure_producer_ids
from odradek.broker.handlers.txn_common import client_version, fenced_as, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.end_txn_request import EndTxnRequest
from odradek.wire.messages.end_txn_response import EndTxnResponse

log = logging.getLogger("odradek.transactions")


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("WRITE", "TRANSACTIONAL_ID"),)


@handler(26, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not txn_allowed(ctx, WRITE, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              producer_id=-1, producer_epoch=-1)
    runtime = await txn_runtime(ctx)
    if runtime is None:
        return EndTxnResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    tid = request.transactional_id
    if err := runtime.coordinator_error(tid):
        return EndTxnResponse(error_code=err)
    version = client_version(ctx, 5)
    if version:  # an exhausted epoch takes a new producer id: one is at hand
        await ensure_producer_ids(ctx.broker)
    decision = runtime.coordinator.end_transaction(
        tid, request.producer_id, request.producer_epoch, request.committed,
        runtime.clock.now_ms(), version, ctx.broker.producer_ids.pop)
    code = fenced_as(await runtime.run(tid, decision), ctx.api_version, 2)
    if code == ErrorCode.INVALID_TXN_STATE:
        meta = runtime.coordinator.transactions.get(tid)
        log.info("EndTxn(%s) of %r (producer %d epoch %d) refused: the transaction is %s",
                 "commit" if request.committed else "abort", tid, request.producer_id,
                 request.producer_epoch, meta.state.kafka_name if meta else "unknown")
    if code or not version:
        return EndTxnResponse(error_code=code, producer_id=-1, producer_epoch=-1)
    return EndTxnResponse(error_code=0, producer_id=decision.producer_id,
                          producer_epoch=decision.producer_epoch)

"""AddOffsetsToTxn (key 25), versions 0–4: a producer's transaction will commit
a group's offsets (``send_offsets_to_transaction``).

Behaviour: the group's ``__consumer_offsets`` partition joins the transaction,
so the transaction's marker reaches it; errors as AddPartitionsToTxn.

Version notes: v2 allows PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below); v3
flexible; v4 (KIP-890) allows TRANSACTION_ABORTABLE, which this call never
needs: answered as v3. (A transactions-v2 client skips AddOffsetsToTxn and
lets TxnOffsetCommit v5 add the partition; Odradek keeps its clients on v1.)
"""

from __future__ import annotations

import logging

from odradek.broker.handlers.acl_checks import READ, WRITE, group_allowed, txn_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.handlers.txn_common import fenced_as, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from odradek.wire.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse

log = logging.getLogger("odradek.transactions")


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("WRITE", "TRANSACTIONAL_ID"), Access("READ", "GROUP"))


@handler(25, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not txn_allowed(ctx, WRITE, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not group_allowed(ctx, READ, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    runtime = await txn_runtime(ctx)
    groups = await group_runtime(ctx)
    if runtime is None or groups is None:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    partition = (OFFSETS_TOPIC, groups.coordinator.partition_of(request.group_id))
    tid = request.transactional_id
    if err := runtime.coordinator_error(tid):
        code = int(err)
    else:
        decision = runtime.coordinator.add_partitions(
            tid, request.producer_id, request.producer_epoch, [partition],
            runtime.clock.now_ms())
        code = fenced_as(await runtime.run(tid, decision), ctx.api_version, 2)
    if code:
        log.info("AddOffsetsToTxn of %r (group %r) refused: %s", tid, request.group_id,
                 ErrorCode(code).name)
    return AddOffsetsToTxnResponse(error_code=code)

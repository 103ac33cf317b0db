"""InitProducerId (key 22), versions 0–5: idempotent and transactional producers.

Behaviour without a transactional id: a fresh producer id with epoch 0, taken
from a block reserved in the metadata journal (so ids are never reused across
restarts). From v3 a producer that already has an id may ask for an epoch
bump (KIP-360): it keeps its id with epoch + 1, or gets a new id when the
epoch would overflow.

With a transactional id the transaction coordinator answers
(:meth:`~odradek.coordinator.txn.coordinator.TransactionCoordinator.init_producer_id`):
the id's producer id with its epoch bumped (fencing every older instance);
an ongoing transaction of an older instance is aborted first and the answer
is CONCURRENT_TRANSACTIONS until it is; a timeout above
``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT.

Version notes: v2 is flexible; v3 adds producer id/epoch to the request; v4
allows PRODUCER_FENCED in responses (INVALID_PRODUCER_EPOCH below it); v5
(KIP-890) allows TRANSACTION_ABORTABLE, which Kafka's coordinator answers
only under transactions v2 (not finalized here): answered as v4.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import (
    IDEMPOTENT_WRITE,
    TOPIC,
    WRITE,
    cluster_allowed,
    txn_allowed,
)
from odradek.broker.handlers.producer_ids import ensure_producer_ids, next_producer_id
from odradek.broker.handlers.txn_common import fenced_as, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.init_producer_id_response import InitProducerIdResponse

MAX_EPOCH = 32767


async def _transactional(
    ctx: RequestContext, request: InitProducerIdRequest, tid: str
) -> InitProducerIdResponse:
    runtime = await txn_runtime(ctx)
    if runtime is None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if code := runtime.coordinator_error(tid):
        return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
    state = ctx.broker
    await ensure_producer_ids(state)
    pid, epoch = (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    decision = runtime.coordinator.init_producer_id(
        tid, request.transaction_timeout_ms, runtime.clock.now_ms(), state.producer_ids.pop,
        pid, epoch)
    code = await runtime.run(tid, decision)
    if code:
        return InitProducerIdResponse(error_code=fenced_as(code, ctx.api_version, 4),
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(error_code=0, producer_id=decision.producer_id,
                                  producer_epoch=decision.producer_epoch)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("WRITE", "TRANSACTIONAL_ID", "transactional"),
    Access("IDEMPOTENT_WRITE", "CLUSTER", "idempotent; or WRITE on any topic"),
)


@handler(22, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    tid = request.transactional_id
    if tid is not None:
        if not txn_allowed(ctx, WRITE, tid):
            return InitProducerIdResponse(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id=-1, producer_epoch=-1)
        return await _transactional(ctx, request, tid)
    if not (cluster_allowed(ctx, IDEMPOTENT_WRITE) or ctx.authz.allowed_on_any(WRITE, TOPIC)):
        # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE or WRITE on some topic
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    bump = ctx.api_version >= 3 and request.producer_id >= 0
    if bump and request.producer_epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(
            error_code=0, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch + 1,
        )
    return InitProducerIdResponse(
        error_code=0, producer_id=await next_producer_id(ctx.broker), producer_epoch=0
    )

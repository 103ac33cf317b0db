"""AllocateProducerIds (key 67), version 0.

Behaviour: the active controller reserves the next block of producer ids
(ProducerIdsRecord through the metadata quorum) for the asking broker, so ids
never repeat across brokers or restarts; NOT_CONTROLLER elsewhere, and a
stale broker epoch gets STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.producer_ids import allocate_block
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import NotControllerError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from odradek.wire.messages.allocate_producer_ids_response import AllocateProducerIdsResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(67, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: AllocateProducerIdsRequest,
                 ) -> AllocateProducerIdsResponse:
    state = ctx.broker
    broker = state.image.brokers.get(request.broker_id)
    if broker is None:
        return AllocateProducerIdsResponse(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED)
    if request.broker_epoch not in (-1, broker.epoch):
        return AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    blocks: list[range] = []
    try:
        outcome = await state.write(partial(allocate_block, node_id=request.broker_id,
                                            blocks=blocks))
    except NotControllerError:
        return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if outcome.error or not blocks:
        error = outcome.error or ErrorCode.UNKNOWN_SERVER_ERROR
        return AllocateProducerIdsResponse(error_code=error)
    return AllocateProducerIdsResponse(producer_id_start=blocks[0].start,
                                       producer_id_len=len(blocks[0]))

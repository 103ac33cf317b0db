"""InitProducerId (key 22), versions 0–4, for idempotent producers.

Behaviour: a fresh producer id with epoch 0, taken from a block reserved in
the metadata journal (so ids are never reused across restarts). From v3 a
producer that already has an id may ask for an epoch bump (KIP-360): it keeps
its id with epoch + 1, or gets a new id when the epoch would overflow.
Transactional ids are not served yet (transactions are a later issue): they
get INVALID_REQUEST rather than a coordinator that does not exist.

Version notes: v2 is flexible; v3 adds producer id/epoch to the request; v4
allows PRODUCER_FENCED in responses.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.state import BrokerState
from odradek.metadata import controller
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.init_producer_id_response import InitProducerIdResponse

MAX_EPOCH = 32767


async def next_producer_id(state: BrokerState) -> int:
    pool = state.producer_ids
    while not pool:
        blocks: list[range] = []
        await state.write(partial(_allocate, node_id=state.node_id, blocks=blocks))
        if not pool:
            pool.extend(reversed(blocks[0]))
    return pool.pop()


def _allocate(image: MetadataImage, node_id: int, blocks: list[range]) -> Outcome:
    block, outcome = controller.allocate_producer_ids(image, node_id)
    blocks.append(block)
    return outcome


@handler(22, (0, 4))
async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
    bump = ctx.api_version >= 3 and request.producer_id >= 0
    if bump and request.producer_epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(
            error_code=0, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch + 1,
        )
    return InitProducerIdResponse(
        error_code=0, producer_id=await next_producer_id(ctx.broker), producer_epoch=0
    )

"""Producer ids: blocks reserved in the metadata log (by the controller in a
cluster), handed out one by one (InitProducerId, AllocateProducerIds)."""

from __future__ import annotations

from functools import partial

from odradek.broker.ports import MetadataPort, NotControllerError
from odradek.metadata import controller
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage


async def ensure_producer_ids(state: MetadataPort) -> None:
    """Reserve a block of producer ids if none is left (so one can be taken
    without waiting)."""
    pool = state.producer_ids
    while not pool:
        blocks: list[range] = []
        try:
            await state.write(partial(allocate_block, node_id=state.node_id, blocks=blocks))
        except NotControllerError:  # cluster mode: the controller hands out blocks
            blocks = [await state.producer_ids_from_controller()]
        if not pool:
            pool.extend(reversed(blocks[0]))


async def next_producer_id(state: MetadataPort) -> int:
    await ensure_producer_ids(state)
    return state.producer_ids.pop()


def allocate_block(image: MetadataImage, node_id: int, blocks: list[range]) -> Outcome:
    """The controller's decision for a block of producer ids for ``node_id``;
    the block itself is appended to ``blocks``."""
    block, outcome = controller.allocate_producer_ids(image, node_id)
    blocks.append(block)
    return outcome

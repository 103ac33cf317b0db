"""A coordinator's internal topic: what its shell needs of the metadata, and creating it.

:func:`ensure_internal_topic` creates ``__consumer_offsets`` or
``__transaction_state`` (or a later coordinator's topic) through the metadata
service: directly on the active controller (one node), else by asking the
controller (a cluster). It is idempotent: a topic created meanwhile by another
request counts as created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from odradek.broker.ports import NotControllerError
from odradek.common.ids import Ids
from odradek.metadata import controller
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage

log = logging.getLogger("odradek.coordinators")


class Metadata(Protocol):
    """What a coordinator's shell needs of the broker's metadata (BrokerState has it)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def node_id(self) -> int: ...

    @property
    def ids(self) -> Ids: ...

    async def write(self, decide: Callable[[MetadataImage], Outcome]) -> Outcome: ...

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool: ...


async def ensure_internal_topic(
    metadata: Metadata, topic: str, partitions: int, configs: Mapping[str, str],
    replication_factor: int = -1,
) -> bool:
    """Create a coordinator's internal topic if it does not exist; True when it does
    (also when another request created it meanwhile)."""
    if topic in metadata.image.topics:
        return True
    try:
        outcome = await metadata.write(lambda image: controller.create_topic(
            image, topic, partitions, replication_factor, configs, node_id=metadata.node_id,
            default_partitions=1, topic_id=metadata.ids.uuid(),
        ))
    except NotControllerError:  # cluster mode: the controller creates it
        return await metadata.create_topic_at_controller(topic, partitions, dict(configs),
                                                         replication_factor)
    if outcome.error and topic not in metadata.image.topics:
        log.error("cannot create %s: %s", topic, outcome.message)
        return False
    return True

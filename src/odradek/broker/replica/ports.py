"""What the replica wing needs of the rest of the broker, as narrow ports.

The replica wing (partitions, fetchers, ISR changes) never imports the control
plane: it reads the metadata through :class:`MetadataView` (the control wing's
``BrokerState`` is one) and sends ISR changes through an
:data:`AlterPartition` callable the composition root wires to the controller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.broker.replica.partitions import PartitionManager
    from odradek.common.clock import Clock
    from odradek.metadata.image import MetadataImage
    from odradek.wire.messages.alter_partition_request import AlterPartitionRequest
    from odradek.wire.messages.alter_partition_response import AlterPartitionResponse


class MetadataView(Protocol):
    """The broker's configuration, clock, metadata image and partitions."""

    config: BrokerConfig
    clock: Clock
    image: MetadataImage
    partitions: PartitionManager
    on_config_change: list[Callable[[set[str]], None]]

    @property
    def node_id(self) -> int: ...


AlterPartition = Callable[["AlterPartitionRequest"], Awaitable["AlterPartitionResponse | None"]]
"""Sends an AlterPartition request to the active controller; its answer, or
None when no controller could be reached."""

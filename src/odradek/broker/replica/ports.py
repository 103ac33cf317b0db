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
    from odradek.broker.replica.partitions import Partition, PartitionManager
    from odradek.common.clock import Clock
    from odradek.metadata.image import MetadataImage
    from odradek.wire.messages.alter_partition_request import AlterPartitionRequest
    from odradek.wire.messages.alter_partition_response import AlterPartitionResponse


class MetadataView(Protocol):
    """The broker's configuration, clock, metadata image and partitions."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def image(self) -> MetadataImage:
        """The current image (replaced, not changed in place, on a snapshot)."""
        ...

    @property
    def partitions(self) -> PartitionManager: ...

    @property
    def on_config_change(self) -> list[Callable[[set[str]], None]]:
        """Called with the names of the dynamic broker configs that changed."""
        ...

    @property
    def node_id(self) -> int: ...


class Leadership(Protocol):
    """Which partitions this node answers for (the metadata service decides)."""

    def serving(self, topic: str, index: int) -> Partition | None:
        """The partition if this node leads it now, else None."""
        ...

    def missing_partition_error(self, topic: str, index: int) -> int:
        """The error for a partition this node does not serve."""
        ...

    @property
    def registered(self) -> bool:
        """Whether this process's registration is in the metadata (a cluster node
        leads nothing before)."""
        ...

    async def wait_in_service(self, timeout_s: float) -> bool:
        """Until this node is registered and caught up (at most ``timeout_s``)."""
        ...


AlterPartition = Callable[["AlterPartitionRequest"], Awaitable["AlterPartitionResponse | None"]]
"""Sends an AlterPartition request to the active controller; its answer, or
None when no controller could be reached."""

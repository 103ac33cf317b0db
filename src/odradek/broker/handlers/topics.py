"""Topic operations shared by several handlers."""

from __future__ import annotations

from odradek.broker.state import BrokerState
from odradek.metadata import controller


def auto_create(state: BrokerState, name: str) -> bool:
    """Create ``name`` with the broker's defaults if auto-creation is on."""
    if not state.config.get_bool("auto.create.topics.enable"):
        return False
    outcome = controller.create_topic(
        state.image, name, -1, -1, {},
        node_id=state.node_id,
        default_partitions=state.config.get_int("num.partitions"),
    )
    state.commit(outcome.records)
    return not outcome.error

"""Requests from this broker to another broker (cluster mode): the transaction
coordinator's WriteTxnMarkers to partition leaders, and its verification of a
transaction with another coordinator.

A broker is reached where :mod:`odradek.broker.peers` says. One connection per
broker (:class:`~odradek.broker.peers.PeerConnections`), opened on first use
and dropped on any failure (the caller retries).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from odradek.broker.net.tls import broker_client_security, inter_broker_listener
from odradek.broker.peers import (
    OVERRIDES,
    BrokerUnavailable,
    PeerConnections,
    broker_address,
    parse_overrides,
)

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState


class BrokerChannel:
    def __init__(self, state: BrokerState, timeout_s: float = 10.0) -> None:
        self.state = state
        self.timeout_s = timeout_s
        self.overrides = parse_overrides(state.config.get(OVERRIDES))
        self.conns = PeerConnections(
            f"odradek-broker-{state.node_id}",
            broker_client_security(state.config, inter_broker_listener(state.config)))

    async def request(self, node_id: int, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` to broker ``node_id``; its answer."""
        try:
            conn = await self.conns.get(node_id, lambda: broker_address(
                self.state.image, self.state.config, node_id, self.overrides), self.timeout_s)
            return await asyncio.wait_for(conn.request(body, version, version), self.timeout_s)
        except BrokerUnavailable:
            raise
        except Exception as exc:  # any failure: a fresh connection next time
            await self.conns.drop(node_id)
            raise BrokerUnavailable(f"broker {node_id}: {exc}") from exc

    async def close(self) -> None:
        await self.conns.close()

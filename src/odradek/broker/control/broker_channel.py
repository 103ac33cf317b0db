"""Requests from this broker to another broker (cluster mode): the transaction
coordinator's WriteTxnMarkers to partition leaders.

A broker is reached where :mod:`odradek.broker.peers` says. One connection per
broker, opened on first use and dropped on any failure (the caller retries).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from odradek.broker.peers import OVERRIDES, broker_address, parse_overrides
from odradek.client.connection import Connection

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState


class BrokerUnavailable(Exception):
    """The broker is unknown, has no endpoint, or could not be reached."""


class BrokerChannel:
    def __init__(self, state: BrokerState, timeout_s: float = 10.0) -> None:
        self.state = state
        self.timeout_s = timeout_s
        self.overrides = parse_overrides(state.config.get(OVERRIDES))
        self._conns: dict[int, Connection] = {}
        self._lock = asyncio.Lock()

    async def request(self, node_id: int, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` to broker ``node_id``; its answer."""
        try:
            conn = await self._connection(node_id)
            return await asyncio.wait_for(conn.request(body, version, version), self.timeout_s)
        except BrokerUnavailable:
            raise
        except Exception as exc:  # any failure: a fresh connection next time
            bad = self._conns.pop(node_id, None)
            if bad is not None:
                with contextlib.suppress(Exception):
                    await bad.close()
            raise BrokerUnavailable(f"broker {node_id}: {exc}") from exc

    async def _connection(self, node_id: int) -> Connection:
        async with self._lock:
            conn = self._conns.get(node_id)
            if conn is None:
                address = broker_address(self.state.image, self.state.config, node_id,
                                         self.overrides)
                if address is None:
                    raise BrokerUnavailable(f"broker {node_id} has no endpoint")
                conn = await Connection.open(address, f"odradek-broker-{self.state.node_id}",
                                             timeout_s=self.timeout_s)
                self._conns[node_id] = conn
            return conn

    async def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns.clear()

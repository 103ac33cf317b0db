"""Requests from this broker to another broker (cluster mode): the transaction
coordinator's WriteTxnMarkers to partition leaders.

A broker is reached on its registered ``inter.broker.listener.name`` listener
(else its first), or where ``odradek.inter.broker.address.overrides``
(``ID=HOST:PORT,...``) says: the chaos harness puts a proxy it controls on each
link that way. One connection per broker, opened on first use and dropped on
any failure (the caller retries).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from odradek.client.connection import Connection

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState


class BrokerUnavailable(Exception):
    """The broker is unknown, has no endpoint, or could not be reached."""


def parse_overrides(raw: str) -> dict[int, str]:
    """``1=127.0.0.1:5000,2=...`` → {1: "127.0.0.1:5000", ...}."""
    out: dict[int, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        node, _, address = item.partition("=")
        out[int(node)] = address
    return out


def broker_address(state: BrokerState, node_id: int, overrides: dict[int, str]) -> str | None:
    """Where this broker reaches broker ``node_id`` (None: not registered)."""
    if node_id in overrides:
        return overrides[node_id]
    broker = state.image.brokers.get(node_id)
    if broker is None:
        return None
    listener = state.config.get("inter.broker.listener.name") or None
    endpoint = broker.endpoint(listener) or broker.endpoint()
    return f"{endpoint.host}:{endpoint.port}" if endpoint is not None else None


class BrokerChannel:
    def __init__(self, state: BrokerState, timeout_s: float = 10.0) -> None:
        self.state = state
        self.timeout_s = timeout_s
        self.overrides = parse_overrides(
            state.config.get("odradek.inter.broker.address.overrides"))
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
                address = broker_address(self.state, node_id, self.overrides)
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

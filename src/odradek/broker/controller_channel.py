"""How a cluster node reaches the active controller (cluster mode).

A node that is not the active controller sends the controller what only the
controller may decide, over the controller's CONTROLLER listener, as Kafka's
brokers do: its own BrokerRegistration, and the admin requests clients sent to
it (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, AlterClientQuotas, DescribeQuorum, and CreateTopics for auto-created
and internal topics) — KIP-590 forwarding, without the Envelope wrapper: the
request is sent as the client sent it and the answer returned as it comes.
A controller that moves while a request is in flight answers NOT_CONTROLLER,
and the client retries as it would against Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from odradek.client.connection import Connection

if TYPE_CHECKING:
    from odradek.broker.state import BrokerState

FORWARDED_APIS = frozenset({19, 20, 33, 37, 44, 49, 55})


class ControllerUnavailable(Exception):
    """No controller is known yet, or it cannot be reached."""


class ControllerChannel:
    def __init__(self, state: BrokerState, timeout_s: float = 10.0) -> None:
        self.state = state
        self.timeout_s = timeout_s
        self._conns: dict[int, Connection] = {}
        self._lock = asyncio.Lock()

    async def request(self, body: Any, version: int) -> Any:
        """Send ``body`` at ``version`` to the active controller; its answer."""
        quorum = self.state.quorum
        if quorum is None:
            raise ControllerUnavailable("no controller quorum")
        controller = quorum.leader_id
        if controller < 0 or controller not in quorum.voters:
            raise ControllerUnavailable("no active controller yet")
        try:
            conn = await self._connection(controller)
            return await asyncio.wait_for(conn.request(body, version, version), self.timeout_s)
        except (OSError, TimeoutError, Exception) as exc:
            bad = self._conns.pop(controller, None)
            if bad is not None:
                with contextlib.suppress(Exception):
                    await bad.close()
            raise ControllerUnavailable(f"controller {controller}: {exc}") from exc

    async def _connection(self, node_id: int) -> Connection:
        async with self._lock:
            conn = self._conns.get(node_id)
            if conn is None:
                quorum = self.state.quorum
                assert quorum is not None
                host, port = quorum.voters[node_id]
                conn = await Connection.open(f"{host}:{port}", f"odradek-node-{self.state.node_id}",
                                             timeout_s=self.timeout_s)
                self._conns[node_id] = conn
            return conn

    async def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns.clear()

"""Where this broker reaches another broker (cluster mode).

A broker is reached on its registered ``inter.broker.listener.name`` listener
(else its first), or where ``odradek.inter.broker.address.overrides``
(``ID=HOST:PORT,...``) says: the chaos harness puts a proxy it controls on each
link that way. Used by the replica fetchers and the broker-to-broker channel.

:class:`PeerConnections` is the one pool of connections to other nodes that
the channels to the controller, to other brokers and to the quorum's voters
share as a class (each keeps its own instance).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.config import BrokerConfig
from odradek.broker.net.tls import inter_broker_listener
from odradek.metadata.image import MetadataImage

if TYPE_CHECKING:
    from odradek.client.connection import Connection
    from odradek.client.security import ClientSecurity

OVERRIDES = "odradek.inter.broker.address.overrides"


def parse_overrides(raw: str) -> dict[int, str]:
    """``1=127.0.0.1:5000,2=...`` → {1: "127.0.0.1:5000", ...}."""
    out: dict[int, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        node, _, address = item.partition("=")
        out[int(node)] = address
    return out


def broker_address(image: MetadataImage, config: BrokerConfig, node_id: int,
                   overrides: dict[int, str]) -> str | None:
    """Where this broker reaches broker ``node_id`` (None: not registered)."""
    if node_id in overrides:
        return overrides[node_id]
    broker = image.brokers.get(node_id)
    if broker is None:
        return None
    listener = inter_broker_listener(config)
    endpoint = broker.endpoint(listener) or broker.endpoint()
    return f"{endpoint.host}:{endpoint.port}" if endpoint is not None else None


class BrokerUnavailable(Exception):
    """The broker is unknown, has no endpoint, or could not be reached."""


class PeerConnections:
    """Connections to other nodes, one per node id: opened on first use (one
    connect per node at a time; other nodes go on), dropped on any failure so
    the next call connects afresh. The controller channel, the broker channel
    and the quorum driver each keep one, so a call on one never queues behind
    another's."""

    def __init__(self, client_id: str, security: ClientSecurity | None = None) -> None:
        """``security``: TLS (and SASL) settings of the connections
        (:func:`odradek.broker.net.tls.broker_client_security`; None: plaintext)."""
        self.client_id = client_id
        self.security = security
        self._conns: dict[int, Connection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def get(self, node_id: int, address: Callable[[], str | None],
                  timeout_s: float) -> Connection:
        """The connection to ``node_id``, opened to ``address()`` if there is none
        (BrokerUnavailable when that is None)."""
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        from odradek.client.connection import Connection  # cluster mode only: not at start-up

        async with self._connecting.setdefault(node_id, asyncio.Lock()):
            conn = self._conns.get(node_id)
            if conn is None:
                where = address()
                if where is None:
                    raise BrokerUnavailable(f"node {node_id} has no endpoint")
                conn = await Connection.open(where, self.client_id, timeout_s=timeout_s,
                                             **({"security": self.security}
                                                if self.security is not None else {}))
                self._conns[node_id] = conn
            return conn

    def held(self) -> dict[int, Connection]:
        """The open connections, by node id."""
        return dict(self._conns)

    async def drop(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (after a failure on it)."""
        bad = self._conns.pop(node_id, None)
        if bad is not None:
            with contextlib.suppress(Exception):
                await bad.close()

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()


class Peers(Protocol):
    """Requests to other brokers by node id (the transaction coordinator's)."""

    async def request(self, node_id: int, body: Any, version: int) -> Any:
        """``body`` at ``version`` to broker ``node_id``; its answer
        (BrokerUnavailable when it cannot be had)."""
        ...

    async def close(self) -> None: ...


class NoPeers:
    """A single node's channel to other brokers: there are none."""

    async def request(self, node_id: int, body: Any, version: int) -> Any:
        raise BrokerUnavailable(f"broker {node_id}: a single node has no other broker")

    async def close(self) -> None:
        pass

"""How a cluster node reaches the active controller (cluster mode).

A node that is not the active controller sends the controller what only the
controller may decide, over the controller's CONTROLLER listener, as Kafka's
brokers do: its own BrokerRegistration, and the admin requests clients sent to
it (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, AlterClientQuotas, DescribeQuorum, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, and CreateTopics for auto-created
and internal topics) — KIP-590 forwarding (the forward stage wraps the admin
requests in an Envelope, broker/net/forward.py).
A controller that moves while a request is in flight answers NOT_CONTROLLER,
and the client retries as it would against Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.peers import PeerConnections

if TYPE_CHECKING:
    from odradek.client.security import ClientSecurity
    from odradek.wire.messages.alter_partition_request import AlterPartitionRequest
    from odradek.wire.messages.alter_partition_response import AlterPartitionResponse

FORWARDED_APIS = frozenset({19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 55, 57, 80, 81})
ALTER_PARTITION_VERSION = 1
log = logging.getLogger("odradek.replication")


class QuorumView(Protocol):
    """What a channel reads of the controller quorum."""

    @property
    def leader_id(self) -> int: ...

    @property
    def voters(self) -> dict[int, tuple[str, int]]: ...

    @property
    def is_leader(self) -> bool: ...


class ControllerUnavailable(Exception):
    """No controller is known yet, it cannot be reached, it did not answer in
    time, or it stopped being the active controller while the request waited."""


class ControllerChannel:
    """Requests to the active controller, over connections of this channel's own.

    A node keeps two: one for its heartbeats (and registration), one for
    everything else (forwarded admin requests, AlterPartition, producer ids), so
    a heartbeat never waits behind a call to a controller that stopped
    answering (Kafka's brokers keep a heartbeat channel apart the same way).

    Each call has a deadline (``timeout_s`` of the call, else the channel's),
    covering the connect too, and ends early, with
    :class:`ControllerUnavailable`, as soon as the quorum names another leader:
    the caller retries against the new controller at once instead of waiting
    out a dead connection.
    """

    POLL_S = 0.05
    """How often a waiting call looks whether the quorum's leader moved."""

    def __init__(self, quorum: QuorumView, node_id: int, timeout_s: float = 10.0,
                 name: str = "node", security: ClientSecurity | None = None) -> None:
        """``quorum``: the metadata log (broker/control/metadata_log.py); a single
        node's names no voters, so every call fails with ControllerUnavailable."""
        self.quorum = quorum
        self.node_id = node_id
        self.timeout_s = timeout_s
        self.name = name
        self.conns = PeerConnections(f"odradek-{name}-{node_id}", security)

    async def request(self, body: Any, version: int, timeout_s: float | None = None) -> Any:
        """Send ``body`` at ``version`` to the active controller; its answer."""
        quorum = self.quorum
        controller = quorum.leader_id
        if controller < 0 or controller not in quorum.voters:
            raise ControllerUnavailable("no active controller yet")
        if controller == self.node_id and not quorum.is_leader:
            # Elected, but not active until it has committed in its epoch: a
            # request sent to itself now would be forwarded to itself again, on
            # the connection still serving the first (a deadlock until the
            # timeout). The caller waits for the quorum's next change.
            raise ControllerUnavailable("this node leads the quorum but is not active yet")
        timeout = self.timeout_s if timeout_s is None else timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        task = loop.create_task(self._call(controller, body, version, timeout))
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(f"no answer within {timeout:g} s")
                done, _ = await asyncio.wait({task}, timeout=min(self.POLL_S, left))
                if done:
                    return task.result()
                if quorum.leader_id != controller:
                    raise ControllerUnavailable(
                        f"controller {controller} is no longer the active controller")
        except ControllerUnavailable:
            await self._drop(controller)
            raise
        except (OSError, TimeoutError, Exception) as exc:
            await self._drop(controller)
            raise ControllerUnavailable(f"controller {controller}: {exc}") from exc
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            elif not task.cancelled():
                # Done while this request was given up on (the connection dropped
                # above fails it): its error is the drop's, already answered for.
                task.exception()

    async def alter_partition(self, request: AlterPartitionRequest
                              ) -> AlterPartitionResponse | None:
        """An ISR change to the controller (the replica wing's ``AlterPartition``
        port); None when no controller could be reached."""
        try:
            response: AlterPartitionResponse = await self.request(request,
                                                                  ALTER_PARTITION_VERSION)
        except ControllerUnavailable as exc:
            log.info("AlterPartition not sent: %s", exc)
            return None
        return response

    async def _call(self, controller: int, body: Any, version: int, timeout: float) -> Any:
        conn = await self.conns.get(controller, lambda: _address(self.quorum, controller),
                                    timeout)
        return await conn.request(body, version, version)

    async def _drop(self, controller: int) -> None:
        await self.conns.drop(controller)

    async def close(self) -> None:
        await self.conns.close()


def _address(quorum: QuorumView, node_id: int) -> str | None:
    voter = quorum.voters.get(node_id)
    return f"{voter[0]}:{voter[1]}" if voter is not None else None

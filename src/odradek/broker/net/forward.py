"""The pipeline's ``forward`` stage: a cluster node sends the admin requests
only the active controller may decide (:data:`FORWARDED_APIS`) to it and
returns its answer (KIP-590 forwarding, :mod:`odradek.broker.control.controller_channel`).

When no controller is known, or the one known cannot be reached, the stage
waits for the quorum's next change of leader (not polling), for at most
:attr:`ForwardToController.wait_s`, then lets this node answer: a node that
became controller meanwhile decides the request itself; one that did not
answers NOT_CONTROLLER, which clients retry after refreshing their metadata,
as against Kafka. A handler that finds this node no longer controller
mid-request (:class:`NotControllerError`) is answered NOT_CONTROLLER too.

A controller answers DescribeQuorum itself when asked on its controller
listener, as Kafka's controllers do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.control.broker_state import NotControllerError
from odradek.broker.control.controller_channel import (
    FORWARDED_APIS,
    ControllerUnavailable,
    not_controller_response,
)
from odradek.broker.net.pipeline import Call, Proceed

if TYPE_CHECKING:
    from odradek.broker.control.controller_channel import ControllerChannel


class QuorumView(Protocol):
    """What forwarding needs of the quorum."""

    @property
    def is_leader(self) -> bool: ...

    async def view_change(self, timeout_s: float) -> bool: ...


class ForwardToController:
    name = "forward"

    def __init__(self, quorum: QuorumView, channel: Callable[[], ControllerChannel],
                 controller_listeners: frozenset[str], wait_s: float = 1.0) -> None:
        self.quorum = quorum
        self.channel = channel
        self.controller_listeners = controller_listeners
        self.wait_s = wait_s

    async def __call__(self, call: Call, proceed: Proceed) -> Any:
        if call.api_key not in FORWARDED_APIS:
            return await proceed(call)
        local = call.api_key == 55 and call.ctx.listener in self.controller_listeners
        if not local and not self.quorum.is_leader:
            answer = await self._forward(call)
            if answer is not None:
                return answer
        try:
            return await proceed(call)
        except NotControllerError:
            return not_controller_response(call.api_key, call.request.body)

    async def _forward(self, call: Call) -> Any:
        """The controller's answer; None when this node should answer (it leads
        now, or no controller answered within :attr:`wait_s`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        quorum = self.quorum
        while not quorum.is_leader:
            try:
                return await self.channel().request(call.request.body, call.request.api_version)
            except ControllerUnavailable:
                left = deadline - loop.time()
                if left <= 0 or not await quorum.view_change(left):
                    return None
        return None

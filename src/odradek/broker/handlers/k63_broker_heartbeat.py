"""BrokerHeartbeat (key 63), versions 0–1.

Behaviour: the active controller notes the broker alive (broker/control/sessions.py);
an unknown broker gets BROKER_ID_NOT_REGISTERED, an old broker epoch
STALE_BROKER_EPOCH, a node that is not the active controller NOT_CONTROLLER.
``WantShutDown`` fences the broker at once (controlled shutdown) and answers
``ShouldShutDown``; a fenced broker that heartbeats again (it was cut off from
the controller, not dead) is unfenced and leads its leaderless partitions
again. ``IsCaughtUp`` is always true: a broker registers (and so heartbeats)
only once its image has caught up with the quorum. A single node, which takes
no other broker, answers INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(63, (0, 1), access=ACCESS)
async def handle(ctx: RequestContext, request: BrokerHeartbeatRequest,
                 ) -> BrokerHeartbeatResponse:
    return await ctx.broker.sessions.heartbeat(request)

"""BrokerHeartbeat (key 63), versions 0–1.

Behaviour: the active controller notes the broker alive (broker/control/sessions.py);
an unknown broker gets BROKER_ID_NOT_REGISTERED, an old broker epoch
STALE_BROKER_EPOCH, a node that is not the active controller NOT_CONTROLLER.
``WantShutDown`` fences the broker at once (controlled shutdown) and answers
``ShouldShutDown``; a fenced broker that heartbeats again (it was cut off from
the controller, not dead) is unfenced and leads its leaderless partitions
again. ``IsCaughtUp`` is always true: a broker registers (and so heartbeats)
only once its image has caught up with the quorum.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(63, (0, 1), access=ACCESS)
async def handle(ctx: RequestContext, request: BrokerHeartbeatRequest,
                 ) -> BrokerHeartbeatResponse:
    state = ctx.broker
    quorum, sessions = state.quorum, state.sessions
    if quorum is None or sessions is None:
        return BrokerHeartbeatResponse(error_code=ErrorCode.INVALID_REQUEST)
    if not quorum.is_leader:
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    broker = state.image.brokers.get(request.broker_id)
    if broker is None:
        return BrokerHeartbeatResponse(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED)
    if request.broker_epoch != broker.epoch:
        return BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    sessions.heard(request.broker_id)
    if request.want_shut_down:
        await sessions.fence(request.broker_id)
        return BrokerHeartbeatResponse(is_caught_up=True, is_fenced=True,
                                       should_shut_down=True)
    if broker.fenced:  # it was cut off, not dead: back in service
        from odradek.broker.control.broker_state import NotControllerError
        from odradek.metadata import controller

        try:
            await state.write(lambda image: controller.unfence_broker(image, request.broker_id))
        except NotControllerError:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    fenced = state.image.brokers[request.broker_id].fenced
    return BrokerHeartbeatResponse(is_caught_up=True, is_fenced=fenced)

"""BrokerRegistration (key 62), versions 0–4.

Behaviour: the active controller registers the broker (RegisterBrokerRecord,
then UnfenceBrokerRecord) through the metadata quorum and answers with the
broker epoch; a different cluster id gets INCONSISTENT_CLUSTER_ID, a node that
is not the active controller NOT_CONTROLLER, a repeated incarnation
DUPLICATE_BROKER_REGISTRATION. A new incarnation of a broker still registered
and unfenced (restarted within its session) fences the old one in the same
write, so that the partitions it led move on at a new leader epoch
(``controller.register_broker``). The broker's ``LogDirs`` (v2+, its log
directories' ids) are kept; a replica whose directory is not among them lost
its data and leaves the ISR (:mod:`odradek.metadata.directories`).
"""

from __future__ import annotations

from odradek.broker.control.broker_state import NotControllerError
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import controller
from odradek.metadata.image import Endpoint
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.wire.messages.broker_registration_response import BrokerRegistrationResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(62, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: BrokerRegistrationRequest,
                 ) -> BrokerRegistrationResponse:
    state = ctx.broker
    if state.quorum is None:
        return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)
    if request.cluster_id != state.cluster_id:
        return BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    if request.broker_id < 0 or not request.listeners:
        return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)
    endpoints = [Endpoint(x.name, x.host, x.port, x.security_protocol) for x in request.listeners]
    if state.sessions is not None:
        # A registration is a sign of life: the session clock starts now, so the
        # fencing check cannot fence the new incarnation on the old one's silence.
        state.sessions.heard(request.broker_id)
    try:
        outcome = await state.write(lambda image: controller.register_broker(
            image, request.broker_id, endpoints, request.incarnation_id, request.rack or None,
            fence_previous=True, log_dirs=list(request.log_dirs or [])))
    except NotControllerError:
        return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
    if outcome.error:
        return BrokerRegistrationResponse(error_code=outcome.error)
    broker = state.image.brokers.get(request.broker_id)
    return BrokerRegistrationResponse(broker_epoch=broker.epoch if broker else -1)

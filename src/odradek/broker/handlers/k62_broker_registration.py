"""BrokerRegistration (key 62), versions 0–4.

Behaviour: the active controller registers the broker (RegisterBrokerRecord,
then a BrokerRegistrationChangeRecord unfencing it) through the metadata
quorum and answers with the broker epoch; a different cluster id gets
INCONSISTENT_CLUSTER_ID, a node that is not the active controller
NOT_CONTROLLER, a repeated incarnation DUPLICATE_BROKER_REGISTRATION. A new
incarnation of a broker still registered and unfenced (restarted within its
session) fences the old one in the same write, so that the partitions it led
move on at a new leader epoch (``controller.register_broker``). The broker's
``LogDirs`` (v2+, its log directories' ids) are kept; a replica whose
directory is not among them lost its data and leaves the ISR
(:mod:`odradek.metadata.directories`). The controller's side lives in
broker/control/sessions.py; a single node, which takes no other broker,
answers INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.wire.messages.broker_registration_response import BrokerRegistrationResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(62, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: BrokerRegistrationRequest,
                 ) -> BrokerRegistrationResponse:
    return await ctx.broker.sessions.register(request)

"""DescribeCluster (key 60), versions 0–2.

Behaviour: the live (registered, unfenced) brokers with their first advertised
listener, the controller id told to clients, and the cluster id. Version notes:
v1 adds the endpoint type (1 = brokers; asking for controllers (2) gets
UNSUPPORTED_ENDPOINT_TYPE, as a broker listener does); v2 (KIP-1073)
``include_fenced_brokers`` also lists the registered brokers that are fenced,
each with ``is_fenced`` set (their first listener; a broker that registered no
listener is left out).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import CLUSTER, authorized_operations
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata.acls import CLUSTER_NAME
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest
from odradek.wire.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER", "only for the authorized operations asked for"),)


@handler(60, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    state = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != 1:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, error_message="Brokers only",
            endpoint_type=request.endpoint_type, cluster_id=state.cluster_id,
        )
    brokers = [
        DescribeClusterBroker(broker_id=node_id, host=e.host, port=e.port,
                              rack=state.image.brokers[node_id].rack)
        for node_id, e in state.live_endpoints(ctx.listener)
    ]
    if ctx.api_version >= 2 and request.include_fenced_brokers:
        name = state.advertised[0].name if state.advertised else None
        for node_id, b in state.image.brokers.items():
            if not b.fenced:
                continue  # listed above
            e = b.endpoint(name) or b.endpoint()
            if e is not None:
                brokers.append(DescribeClusterBroker(broker_id=node_id, host=e.host,
                                                     port=e.port, rack=b.rack, is_fenced=True))
        brokers.sort(key=lambda b: b.broker_id)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=state.cluster_id, controller_id=state.client_controller_id, brokers=brokers,
        cluster_authorized_operations=authorized_operations(
            ctx, CLUSTER, CLUSTER_NAME, request.include_cluster_authorized_operations),
    )

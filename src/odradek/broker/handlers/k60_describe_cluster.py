"""DescribeCluster (key 60), versions 0–1.

Behaviour: this node as the only broker and the controller, with the
cluster id. Version notes: v1 adds the endpoint type (1 = brokers; asking for
controllers (2) gets UNSUPPORTED_ENDPOINT_TYPE, as a broker listener does).
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest
from odradek.wire.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)


@handler(60, (0, 1))
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
        for node_id, e in state.live_endpoints()
    ]
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=state.cluster_id, controller_id=state.client_controller_id, brokers=brokers,
    )

"""ListGroups (key 16), versions 0–5.

Behaviour: every group this node coordinates (all of them), with protocol
type; groups of partitions still loading are left out.

Version notes: v1 throttle time; v3 flexible; v4 a state filter
(case-insensitive) and the state of each group; v5 a type filter (``classic``,
``consumer``) and the type of each group (KIP-848).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE, cluster_allowed, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.list_groups_request import ListGroupsRequest
from odradek.wire.messages.list_groups_response import ListGroupsResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER", "else DESCRIBE on each group listed"),)


@handler(16, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    runtime = await group_runtime(ctx)
    if runtime is None:
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if await runtime.settled(None):  # a partition's writes are not committed (yet)
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    states = req.states_filter if ctx.api_version >= 4 else None
    types = req.types_filter if ctx.api_version >= 5 else None
    groups = runtime.coordinator.list_groups(states, types)
    if not cluster_allowed(ctx, DESCRIBE):  # only the groups it may describe
        groups = [g for g in groups if group_allowed(ctx, DESCRIBE, g.group_id)]
    return ListGroupsResponse(error_code=0, groups=groups)

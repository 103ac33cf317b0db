"""DescribeGroups (key 15), versions 0–5.

Behaviour: state, protocol type, selected protocol and members of each group.
Member metadata and assignments are given only for a Stable group, as Kafka
does. A group that does not exist is described as Dead with no error.

Version notes: v1 throttle time; v3 authorized operations (not computed:
-2^31); v4 member group instance ids; v5 flexible.
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.registry import handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.describe_groups_response import DescribedGroup, DescribeGroupsResponse


@handler(15, (0, 5))
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    runtime = await group_runtime(ctx)
    groups = []
    for gid in req.groups:
        if runtime is None:
            groups.append(DescribedGroup(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=gid
            ))
        else:
            groups.append(runtime.coordinator.describe(gid))
    return DescribeGroupsResponse(groups=groups)

"""DescribeGroups (key 15), versions 0–6.

Behaviour: state, protocol type, selected protocol and members of each group.
Member metadata and assignments are given only for a Stable group, as Kafka
does. A group that does not exist, or is a KIP-848 consumer group, is
described as Dead with no error; from v6 as GROUP_ID_NOT_FOUND with a message
("Group g not found." / "Group g is not a classic group."), as Kafka 4.0 does.

Version notes: v1 throttle time; v3 authorized operations (not computed:
-2^31); v4 member group instance ids; v5 flexible; v6 error messages (KIP-1043).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import (
    DESCRIBE,
    GROUP,
    authorized_operations,
    group_allowed,
)
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.describe_groups_response import DescribedGroup, DescribeGroupsResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "GROUP"),)


@handler(15, (0, 6), access=ACCESS)
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    runtime = await group_runtime(ctx)
    unsettled = await runtime.settled(req.groups) if runtime is not None else set()
    groups = []
    for gid in req.groups:
        if not group_allowed(ctx, DESCRIBE, gid):
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                         group_id=gid))
        elif runtime is None:
            groups.append(DescribedGroup(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=gid
            ))
        elif gid in unsettled:  # its writes are not committed (yet): no dirty read
            groups.append(DescribedGroup(
                error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, group_id=gid))
        else:
            described = runtime.coordinator.describe(gid, ctx.api_version)
            if ctx.api_version >= 3 and req.include_authorized_operations:
                described.authorized_operations = authorized_operations(ctx, GROUP, gid)
            groups.append(described)
    return DescribeGroupsResponse(groups=groups)

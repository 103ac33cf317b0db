"""DeleteGroups (key 42), versions 0–2.

Behaviour: a group with no members is deleted with its committed offsets
(tombstones in ``__consumer_offsets``); GROUP_ID_NOT_FOUND for an unknown
group, NON_EMPTY_GROUP for one with members.

Version notes: v1 same as v0; v2 flexible.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DELETE, group_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_groups_request import DeleteGroupsRequest
from odradek.wire.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)


async def _delete(ctx: RequestContext, names: list[str]) -> dict[str, int]:
    runtime = await group_runtime(ctx)
    if runtime is None:
        return dict.fromkeys(names, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        errors: dict[str, int] = await runtime.call(
            lambda t: runtime.coordinator.delete_groups(t, names))
        return errors
    except CoordinatorWriteError:
        return dict.fromkeys(names, ErrorCode.COORDINATOR_NOT_AVAILABLE)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DELETE", "GROUP"),)


@handler(42, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = req.groups_names
    errors: dict[str, int] = {n: ErrorCode.GROUP_AUTHORIZATION_FAILED for n in names
                              if not group_allowed(ctx, DELETE, n)}
    allowed = [n for n in names if n not in errors]
    if allowed:
        errors.update(await _delete(ctx, allowed))
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=name, error_code=errors[name]) for name in names
    ])

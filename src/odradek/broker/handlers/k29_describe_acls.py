"""DescribeAcls (key 29), versions 1–3.

Behaviour: the bindings of this node's metadata image that the filter matches
(:meth:`AclFilter.matches`: ANY and null match anything, MATCH every binding
that applies to the named resource), grouped by resource pattern. A filter
with UNKNOWN in it gets INVALID_REQUEST; no authorizer, SECURITY_DISABLED.
Needs DESCRIBE on the cluster (the ``authorize`` stage).
"""

from __future__ import annotations

from odradek.broker.handlers.acl_common import SECURITY_DISABLED_MESSAGE, VERSIONS, filter_of
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_acls_request import DescribeAclsRequest
from odradek.wire.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(29, VERSIONS, access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if not ctx.authz.enabled:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message=SECURITY_DISABLED_MESSAGE)
    f = filter_of(request)
    if f.unknown():
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                    error_message="The filter contains UNKNOWN elements")
    groups: dict[tuple[int, str, int], list[AclDescription]] = {}
    for _id, b in ctx.broker.image.acls.matching(f):
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            AclDescription(b.principal, b.host, b.operation, b.permission))
    return DescribeAclsResponse(error_code=0, error_message=None, resources=[
        DescribeAclsResource(rtype, name, pattern, acls)
        for (rtype, name, pattern), acls in groups.items()])

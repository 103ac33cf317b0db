"""DeleteAcls (key 31), versions 1–3.

Behaviour: each filter removes the bindings it matches and reports them
(:func:`odradek.metadata.acl_changes.delete_acls`; a filter with UNKNOWN in
it gets INVALID_REQUEST); the removals go through the metadata log.
Forwarded to the active controller in a cluster. Needs ALTER on the cluster
(the ``authorize`` stage); no authorizer, SECURITY_DISABLED per filter.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.acl_common import SECURITY_DISABLED_MESSAGE, VERSIONS, filter_of
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import acl_changes
from odradek.metadata.acls import AclFilter
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_acls_request import DeleteAclsRequest
from odradek.wire.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


def error_response(request: DeleteAclsRequest, code: int) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(code, None)
                                              for _ in request.filters])


@handler(31, VERSIONS, error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    if not ctx.authz.enabled:
        return DeleteAclsResponse(filter_results=[
            DeleteAclsFilterResult(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
            for _ in request.filters])
    filters = [filter_of(f) for f in request.filters]
    outcome = await ctx.broker.write(partial(_delete, filters=filters))
    return DeleteAclsResponse(filter_results=[
        DeleteAclsFilterResult(r.error, r.message, [
            DeleteAclsMatchingAcl(0, None, b.resource_type, b.name, b.pattern_type, b.principal,
                                  b.host, b.operation, b.permission)
            for b in r.removed])
        for r in outcome.results])


def _delete(image: MetadataImage, filters: list[AclFilter]) -> acl_changes.AclOutcome:
    return acl_changes.delete_acls(image.acls, filters)

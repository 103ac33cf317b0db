"""CreateAcls (key 30), versions 1–3.

Behaviour: the controller stores each valid binding with a random id
(:func:`odradek.metadata.acl_changes.create_acls`: INVALID_REQUEST for an
UNKNOWN or ANY enum, a pattern other than LITERAL or PREFIXED, an empty name;
an existing binding again is a success that writes nothing). The records go
through the metadata log, so every node enforces them and they survive
restarts. Forwarded to the active controller in a cluster. Needs ALTER on the
cluster (the ``authorize`` stage); no authorizer, SECURITY_DISABLED per creation.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.acl_common import SECURITY_DISABLED_MESSAGE, VERSIONS, binding_of
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.common.ids import Ids
from odradek.metadata import acl_changes
from odradek.metadata.acls import AclBinding
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.create_acls_request import CreateAclsRequest
from odradek.wire.messages.create_acls_response import AclCreationResult, CreateAclsResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


def error_response(request: CreateAclsRequest, code: int) -> CreateAclsResponse:
    return CreateAclsResponse(results=[AclCreationResult(code, None) for _ in request.creations])


@handler(30, VERSIONS, error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    if not ctx.authz.enabled:
        return CreateAclsResponse(results=[
            AclCreationResult(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
            for _ in request.creations])
    wanted = [binding_of(c) for c in request.creations]
    outcome = await ctx.broker.write(partial(_create, wanted=wanted, ids=ctx.broker.ids))
    return CreateAclsResponse(results=[AclCreationResult(r.error, r.message)
                                       for r in outcome.results])


def _create(image: MetadataImage, wanted: list[AclBinding], ids: Ids) -> acl_changes.AclOutcome:
    return acl_changes.create_acls(image.acls, wanted, ids.uuid)

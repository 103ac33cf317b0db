"""AlterUserScramCredentials (key 51), version 0.

Behaviour: deletions and upsertions (name, mechanism, iterations, salt and
the client's salted password) are decided by the controller
(:func:`odradek.metadata.scram.alter`: DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL,
UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND per user), which derives
StoredKey and ServerKey and writes the accepted users' records in one
metadata batch (``UserScramCredentialRecord`` / ``RemoveUserScramCredentialRecord``).
On a cluster the request is forwarded to the active controller.

Version notes: v0 is flexible.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import scram
from odradek.metadata.image import MetadataImage
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from odradek.wire.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)


def _alter(image: MetadataImage, deletions: list[tuple[str, int]],
           upsertions: list[scram.Upsertion]) -> scram.Alteration:
    return scram.alter(image.scram, deletions, upsertions)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


def error_response(request: AlterUserScramCredentialsRequest,
                   code: int) -> AlterUserScramCredentialsResponse:
    """Every user of ``request`` answered ``code`` (NOT_CONTROLLER when forwarding failed)."""
    users = dict.fromkeys([d.name for d in request.deletions]
                          + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=u, error_code=code, error_message=None)
        for u in users])


@handler(51, (0, 0), error_response=error_response, access=ACCESS)
async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest
                 ) -> AlterUserScramCredentialsResponse:
    deletions = [(d.name, d.mechanism) for d in request.deletions]
    upsertions = [scram.Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                                  bytes(u.salted_password)) for u in request.upsertions]
    decision = await ctx.broker.write(partial(_alter, deletions=deletions,
                                              upsertions=upsertions))
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=user, error_code=error, error_message=message)
        for user, (error, message) in decision.results.items()])

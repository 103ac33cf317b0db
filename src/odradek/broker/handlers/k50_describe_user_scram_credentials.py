"""DescribeUserScramCredentials (key 50), version 0.

Behaviour: for each user named (every user with a credential when ``Users``
is null or empty), its mechanisms and iteration counts, never a salt or key;
an unknown user is answered RESOURCE_NOT_FOUND, a user named twice
DUPLICATE_RESOURCE (:func:`odradek.metadata.scram.describe`). Read from this
broker's metadata image, which every broker replays.

Version notes: v0 is flexible.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import scram
from odradek.wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from odradek.wire.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(50, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequest
                 ) -> DescribeUserScramCredentialsResponse:
    names = [u.name for u in request.users] if request.users else None
    results = [
        DescribeUserScramCredentialsResult(
            user=user, error_code=error, error_message=message,
            credential_infos=[CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
        for user, error, message, infos in scram.describe(ctx.broker.image.scram, names)]
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None,
                                                results=results)

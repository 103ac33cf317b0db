"""UpdateRaftVoter (key 82), version 0: see :mod:`odradek.broker.handlers.raft_voters`."""

from __future__ import annotations

from odradek.broker.handlers.raft_voters import change
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.update_raft_voter_request import UpdateRaftVoterRequest
from odradek.wire.messages.update_raft_voter_response import UpdateRaftVoterResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(82, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
    code, message = await change(ctx, 82, request)
    del message  # v0 has no error message
    return UpdateRaftVoterResponse(error_code=code)

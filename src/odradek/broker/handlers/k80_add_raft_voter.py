"""AddRaftVoter (key 80), version 0: see :mod:`odradek.broker.handlers.raft_voters`."""

from __future__ import annotations

from odradek.broker.handlers.raft_voters import change
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.add_raft_voter_request import AddRaftVoterRequest
from odradek.wire.messages.add_raft_voter_response import AddRaftVoterResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


@handler(80, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: AddRaftVoterRequest) -> AddRaftVoterResponse:
    code, message = await change(ctx, 80, request)
    return AddRaftVoterResponse(error_code=code, error_message=message)

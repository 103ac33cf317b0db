"""RemoveRaftVoter (key 81), version 0: see :mod:`odradek.broker.handlers.raft_voters`."""

from __future__ import annotations

from odradek.broker.handlers.raft_voters import change
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from odradek.wire.messages.remove_raft_voter_response import RemoveRaftVoterResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER", "CLUSTER"),)


@handler(81, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
    code, message = await change(ctx, 81, request)
    return RemoveRaftVoterResponse(error_code=code, error_message=message)

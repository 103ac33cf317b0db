"""UpdateRaftVoter (key 82), version 0: a voter tells the leader its endpoints
and supported ``kraft.version`` range (KIP-853).

Behaviour: a controller-to-controller RPC, like Vote: handed to the quorum
driver (broker/control/quorum_driver.py), whose Raft core answers at once: the
leader of the request's epoch appends a VotersRecord with the voter's new
endpoints (the rules and error codes are :func:`odradek.raft.membership.check_update`'s:
INVALID_REQUEST, VOTER_NOT_FOUND, REQUEST_TIMED_OUT while another voter change
is uncommitted, UNSUPPORTED_VERSION with static voters), any other node
NOT_LEADER_OR_FOLLOWER (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for another
epoch), naming the leader in ``CurrentLeader``. It answers before the change
commits, as Kafka does; the voter sends it again in a later epoch if needed. A
node without a controller quorum answers INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.broker.handlers.raft_common import serve_raft
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.messages.update_raft_voter_request import UpdateRaftVoterRequest
from odradek.wire.messages.update_raft_voter_response import UpdateRaftVoterResponse

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(82, (0, 0), access=ACCESS)
async def handle(ctx: RequestContext, request: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
    answer: UpdateRaftVoterResponse = await serve_raft(ctx, 82, request)
    return answer

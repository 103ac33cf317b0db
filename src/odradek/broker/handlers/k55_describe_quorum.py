"""DescribeQuorum (key 55), versions 0–2.

Behaviour: the active controller answers with the quorum's leader, epoch,
high watermark and, per voter and observer, its log end offset and the wall
clock times of its last fetch and of the last time it was caught up (-1:
never). Any other node answers NOT_LEADER_OR_FOLLOWER naming the leader it
knows, so a tool can ask again there. A single node (no controller quorum)
answers as the one-voter quorum a single combined Kafka node is: itself as
leader (epoch 1) and only voter, caught up now, the high watermark at the end
of its metadata journal. v2 adds the voters' controller endpoints (a single
node gives its first advertised listener).
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.raft.node import Role
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import describe_quorum_response as dq
from odradek.wire.messages.describe_quorum_request import DescribeQuorumRequest

METADATA = "__cluster_metadata"


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(55, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeQuorumRequest) -> dq.DescribeQuorumResponse:
    quorum = ctx.broker.quorum
    if quorum is None:
        return _single_node(ctx)
    raft = quorum.raft
    part = dq.PartitionData(0, leader_id=quorum.leader_id, leader_epoch=raft.epoch,
                            high_watermark=raft.high_watermark)
    if raft.role is not Role.LEADER:
        part.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        part.error_message = f"ask the leader, node {quorum.leader_id}"
    else:
        now = quorum.clock.monotonic_ms()
        for row in raft.describe(now):
            state = dq.ReplicaState(row.node_id, log_end_offset=row.end_offset,
                                    last_fetch_timestamp=quorum.wall_ms(row.last_fetch_ms),
                                    last_caught_up_timestamp=quorum.wall_ms(
                                        row.last_caught_up_ms))
            (part.current_voters if row.node_id in quorum.voters else part.observers).append(
                state)
    nodes = [dq.Node(node_id, [dq.Listener("CONTROLLER", host, port)])
             for node_id, (host, port) in sorted(quorum.voters.items())]
    return dq.DescribeQuorumResponse(
        topics=[dq.TopicData(METADATA, [part])], nodes=nodes if ctx.api_version >= 2 else [])


def _single_node(ctx: RequestContext) -> dq.DescribeQuorumResponse:
    state = ctx.broker
    end = state.journal.end_offset()
    now = state.clock.now_ms()
    me = dq.ReplicaState(state.node_id, log_end_offset=end, last_fetch_timestamp=now,
                         last_caught_up_timestamp=now)
    part = dq.PartitionData(0, error_message=None, leader_id=state.node_id, leader_epoch=1,
                            high_watermark=end, current_voters=[me])
    nodes = [dq.Node(state.node_id, [dq.Listener(a.name, a.host, a.port)
                                     for a in state.advertised[:1]])]
    return dq.DescribeQuorumResponse(error_message=None,
                                     topics=[dq.TopicData(METADATA, [part])],
                                     nodes=nodes if ctx.api_version >= 2 else [])

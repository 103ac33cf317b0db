"""DescribeQuorum (key 55), versions 0–2.

Behaviour: the active controller answers with the quorum's leader, epoch,
high watermark and, per voter and observer, its log end offset and the wall
clock times of its last fetch and of the last time it was caught up (-1:
never). Any other node answers NOT_LEADER_OR_FOLLOWER naming the leader it
knows, so a tool can ask again there. A single node (no controller quorum)
answers as the one-voter quorum a single combined Kafka node is: itself as
leader (epoch 1) and only voter, caught up now, the high watermark at the end
of its metadata journal. v2 adds the voters' controller endpoints (a single
node gives its first advertised listener) and each replica's directory id
(KIP-853; zero for a static quorum's voters).
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import describe_quorum_response as dq
from odradek.wire.messages.describe_quorum_request import DescribeQuorumRequest

METADATA = "__cluster_metadata"


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE", "CLUSTER"),)


@handler(55, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeQuorumRequest) -> dq.DescribeQuorumResponse:
    view = ctx.broker.metadata.describe()
    part = dq.PartitionData(0, leader_id=view.leader_id, leader_epoch=view.epoch,
                            high_watermark=view.high_watermark)
    if view.error_message is not None:
        part.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        part.error_message = view.error_message
    else:
        part.error_message = None
    for row in view.replicas:
        state = dq.ReplicaState(row.node_id, log_end_offset=row.end_offset,
                                last_fetch_timestamp=row.last_fetch_ms,
                                last_caught_up_timestamp=row.last_caught_up_ms)
        if ctx.api_version >= 2:
            state.replica_directory_id = row.directory_id
        (part.current_voters if row.voter else part.observers).append(state)
    nodes: dict[int, list[dq.Listener]] = {}
    for node_id, name, host, port in view.nodes:
        nodes.setdefault(node_id, []).append(dq.Listener(name, host, port))
    return dq.DescribeQuorumResponse(
        error_message=None, topics=[dq.TopicData(METADATA, [part])],
        nodes=[dq.Node(n, ls) for n, ls in nodes.items()] if ctx.api_version >= 2 else [])

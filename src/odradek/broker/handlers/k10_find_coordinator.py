"""FindCoordinator (key 10), versions 0–6.

Behaviour: the coordinator of a group (transactional id) is the broker leading
its partition of ``__consumer_offsets`` (``__transaction_state``), Kafka's
hash of the key modulo the partition count; on one node, this node. The topic
is created on first use (by the controller, in a cluster). Any other key type is
INVALID_REQUEST, share-group keys (type 2, v6) included: Odradek serves no
share groups (KIP-932).

Version notes: v1 key type, throttle and error message; v3 flexible; v4 a
batch of keys answered one coordinator each (KIP-699); v5 (KIP-890) lets the
broker answer TRANSACTION_ABORTABLE, which a coordinator lookup never needs;
v6 (KIP-932) admits key type 2.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE, group_allowed, txn_allowed
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.handlers.txn_common import txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.coordinator.records import OFFSETS_TOPIC, partition_for
from odradek.coordinator.txn.records import TXN_TOPIC
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type not in (0, 1):
        message = ("share groups are not served" if key_type == 2
                   else f"unknown key type {key_type}")
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.INVALID_REQUEST, error_message=message)
    if key_type == 1 and not key:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.INVALID_REQUEST,
                           error_message="the transactional id is empty")
    if key_type == 0 and not group_allowed(ctx, DESCRIBE, key):
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None)
    if key_type == 1 and not txn_allowed(ctx, DESCRIBE, key):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_message=None,
                           error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    ready = await (group_runtime(ctx) if key_type == 0 else txn_runtime(ctx))
    if ready is None:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           error_message="the coordinator is not available")
    node_id = _leader_of(ctx, key, key_type)
    endpoint = ctx.broker.endpoint_of(node_id, ctx.listener)
    if endpoint is None:
        return Coordinator(key=key, node_id=-1, host="", port=-1,
                           error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           error_message="the coordinator's broker is not registered")
    return Coordinator(key=key, node_id=node_id, host=endpoint.host,
                       port=endpoint.port, error_code=0, error_message=None)


def _leader_of(ctx: RequestContext, key: str, key_type: int) -> int:
    """The broker leading the key's coordinator partition (``partition_for``:
    Kafka's hash of the key modulo the internal topic's partition count)."""
    topic = ctx.broker.image.topics.get(TXN_TOPIC if key_type == 1 else OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        return ctx.broker.node_id
    p = topic.partitions.get(partition_for(key, len(topic.partitions)))
    return p.leader if p is not None else ctx.broker.node_id


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("DESCRIBE", "GROUP", "key type 0"),
    Access("DESCRIBE", "TRANSACTIONAL_ID", "key type 1"),
)


@handler(10, (0, 6), access=ACCESS)
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[await _find(ctx, key, req.key_type) for key in req.coordinator_keys]
        )
    c = await _find(ctx, req.key, req.key_type)
    return FindCoordinatorResponse(
        error_code=c.error_code, error_message=c.error_message, node_id=c.node_id,
        host=c.host, port=c.port,
    )

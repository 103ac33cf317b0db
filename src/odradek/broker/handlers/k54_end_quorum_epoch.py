"""EndQuorumEpoch (key 54), versions 0–1: a leader resigns, naming its preferred successors.

Behaviour: handed to the quorum driver (broker/control/quorum_driver.py), which answers for
the Raft core; a node without a quorum answers INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.handlers.raft_common import serve_raft
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("CLUSTER_ACTION", "CLUSTER"),)


@handler(54, (0,1), access=ACCESS)
async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve_raft(ctx, 54, request)

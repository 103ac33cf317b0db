"""Shared by the KRaft RPC handlers (Vote, BeginQuorumEpoch, EndQuorumEpoch,
FetchSnapshot, and Fetch on ``__cluster_metadata-0``): hand the request to the
quorum driver, or refuse it on a node that runs no quorum (the single-node
default keeps its metadata in a local journal)."""

from __future__ import annotations

from typing import Any

from odradek.broker.net.context import RequestContext
from odradek.wire import api
from odradek.wire.errors import ErrorCode


async def serve_raft(ctx: RequestContext, api_key: int, request: Any) -> Any:
    quorum = ctx.broker.quorum
    if quorum is None:
        return api.response_class(api_key)(  # type: ignore[call-arg]
            error_code=ErrorCode.INVALID_REQUEST)
    return await quorum.serve(api_key, request)

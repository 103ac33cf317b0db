"""Shared by the KRaft RPC handlers (Vote, BeginQuorumEpoch, EndQuorumEpoch,
FetchSnapshot, and Fetch on ``__cluster_metadata-0``): the metadata log answers
them (broker/control/metadata_log.py). A single node, which runs no quorum,
answers INVALID_REQUEST."""

from __future__ import annotations

from typing import Any

from odradek.broker.net.context import RequestContext


async def serve_raft(ctx: RequestContext, api_key: int, request: Any) -> Any:
    return await ctx.broker.metadata.serve(api_key, request, ctx.api_version)

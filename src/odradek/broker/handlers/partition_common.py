"""What the partition handlers share (Fetch, ListOffsets, OffsetForLeaderEpoch)."""

from __future__ import annotations

from odradek.broker.ports import PartitionPort
from odradek.wire.errors import ErrorCode


def epoch_error(part: PartitionPort, current_leader_epoch: int) -> int:
    """KIP-320: a fetcher that knows a newer leader epoch than this replica gets
    UNKNOWN_LEADER_EPOCH (this broker's metadata is behind), an older one
    FENCED_LEADER_EPOCH (its own metadata is); -1 skips the check."""
    if current_leader_epoch < 0 or current_leader_epoch == part.state.leader_epoch:
        return 0
    if current_leader_epoch > part.state.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH

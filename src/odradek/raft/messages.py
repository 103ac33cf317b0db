"""The messages Raft nodes exchange, as plain values.

Each is one of Kafka's KRaft RPCs reduced to what the core decides on; the
broker shell maps them to Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54),
Fetch (1) on ``__cluster_metadata-0``, FetchSnapshot (59) and UpdateRaftVoter
(82, a voter telling the leader its endpoints, KIP-853). ``src`` and
``dst`` are node ids. A response echoes what its request asked for where the
core must match the two (``fetch_offset``), because networks duplicate and
reorder.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.raft.log import Entry, Snapshot
from odradek.raft.voters import NO_DIRECTORY, SUPPORTED_KRAFT_VERSIONS, Endpoint


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: int
    dst: int
    epoch: int
    """The epoch the candidate stands in (its current epoch + 1 for a pre-vote)."""
    last_epoch: int
    end_offset: int
    pre_vote: bool
    voter_directory_id: uuid.UUID = NO_DIRECTORY
    """The directory id the candidate knows the recipient by (KIP-853): a replica
    whose directory differs (its disk was wiped) is not that voter and refuses."""


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool
    error: int = 0


@dataclass(frozen=True, slots=True)
class BeginEpochRequest:
    src: int
    dst: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BeginEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0


@dataclass(frozen=True, slots=True)
class EndEpochRequest:
    src: int
    dst: int
    epoch: int
    successors: tuple[int, ...]
    """Voters ranked by how far they had fetched: the first waits least."""


@dataclass(frozen=True, slots=True)
class EndEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0


@dataclass(frozen=True, slots=True)
class FetchRequest:
    src: int
    dst: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    directory_id: uuid.UUID = NO_DIRECTORY
    """The fetching replica's directory id (KIP-853), matched when it is added as a voter."""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    fetch_offset: int
    high_watermark: int = -1
    entries: tuple[Entry, ...] = ()
    diverging: tuple[int, int] | None = None
    """(epoch, end offset) where the follower's log parts from the leader's."""
    snapshot_id: tuple[int, int] | None = None
    """(end offset, epoch) of the snapshot to fetch: the follower is below the log start."""
    error: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    src: int
    dst: int
    epoch: int
    snapshot_id: tuple[int, int]


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    snapshot: Snapshot | None = None
    error: int = 0


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """A voter (``src``, with ``directory_id``) asks the leader of ``epoch`` to
    record its current endpoints and ``kraft.version`` range in the voter set."""

    src: int
    dst: int
    epoch: int
    directory_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    kraft_versions: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0


Message = (
    VoteRequest | VoteResponse | BeginEpochRequest | BeginEpochResponse | EndEpochRequest
    | EndEpochResponse | FetchRequest | FetchResponse | FetchSnapshotRequest
    | FetchSnapshotResponse | UpdateVoterRequest | UpdateVoterResponse
)

"""What a leader tracks of its quorum: each replica's progress and the high watermark.

Pull replication means the leader learns a follower's log end from the
follower's next Fetch: ``fetch_offset`` is the follower's flushed end once the
Fetch's ``last_fetched_epoch`` matched the leader's log (the leader answers a
mismatch with a diverging epoch and updates nothing).

The high watermark is the largest offset that a majority of voters (the leader
counted with its *flushed* end) have, and it only moves once it is past the
epoch's start offset — the leader's own LeaderChange entry must be committed
before anything of the new epoch is, which also commits every older entry the
leader carries (KRaft's ``LeaderState.maybeUpdateHighWatermark``).

Check quorum: a leader that has not heard a Fetch from a majority (itself
counted) within 1.5 × ``fetch_timeout_ms`` resigns.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.raft.voters import NO_DIRECTORY


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    acknowledged: bool = False
    """Has fetched (or answered BeginQuorumEpoch) in this epoch."""
    begin_sent_ms: int = -1
    sent_high_watermark: int = -1
    """The high watermark in the last Fetch answer to this replica: a fetch is
    parked as a long poll only if the replica already knows the current one."""
    directory_id: uuid.UUID = NO_DIRECTORY
    """The directory id its last Fetch named (KIP-853's ReplicaDirectoryId)."""


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One row of DescribeQuorum."""

    node_id: int
    end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int
    directory_id: uuid.UUID = NO_DIRECTORY


@dataclass(slots=True)
class LeaderState:
    node_id: int
    epoch: int
    epoch_start_offset: int
    voters: frozenset[int]
    started_ms: int
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    """Voters other than the leader, and observers once they fetch."""
    directories: dict[int, uuid.UUID] = field(default_factory=dict)
    """The voters' directory ids (kraft.version 1): a fetch from another directory
    (the disk was wiped) is not that voter's and counts for no majority; one that
    names none (an older Fetch version) is taken as the voter's."""

    def __post_init__(self) -> None:
        for voter in self.voters - {self.node_id}:
            self.progress[voter] = ReplicaProgress()

    def set_voters(self, voters: frozenset[int],
                   directories: dict[int, uuid.UUID] | None = None) -> None:
        """The voter set changed (a VotersRecord appended): majorities count the new one."""
        self.voters = voters
        self.directories = directories or {}
        for voter in voters - {self.node_id}:
            self.progress.setdefault(voter, ReplicaProgress())

    def record_fetch(self, replica: int, fetch_offset: int, leader_end: int, now_ms: int,
                     directory_id: uuid.UUID = NO_DIRECTORY) -> None:
        p = self.progress.setdefault(replica, ReplicaProgress())
        p.directory_id = directory_id
        if fetch_offset >= leader_end:
            p.last_caught_up_ms = now_ms
        elif p.end_offset >= 0 and fetch_offset >= p.end_offset and p.last_fetch_ms >= 0:
            # Caught up to where the leader was at the previous fetch (Kafka's rule).
            p.last_caught_up_ms = max(p.last_caught_up_ms, p.last_fetch_ms)
        p.end_offset = fetch_offset
        p.last_fetch_ms = now_ms
        p.acknowledged = True

    def majority_end(self, leader_flushed: int) -> int:
        """The largest offset that a majority of voters have (the leader counted only
        while it is one: a leader removing itself leads a set it is not in)."""
        ends = [leader_flushed if v == self.node_id else self._end(v) for v in self.voters]
        ends.sort(reverse=True)
        return ends[len(self.voters) // 2] if ends else -1

    def _end(self, voter: int) -> int:
        p = self.progress[voter]
        want = self.directories.get(voter, NO_DIRECTORY)
        # A fetch naming no directory (below Fetch v17) is taken as the voter's.
        return p.end_offset if NO_DIRECTORY in (want, p.directory_id) or (
            want == p.directory_id) else -1

    def new_high_watermark(self, leader_flushed: int, current: int) -> int | None:
        candidate = self.majority_end(leader_flushed)
        if candidate > self.epoch_start_offset and candidate > current:
            return candidate
        return None

    def has_quorum(self, now_ms: int, window_ms: int) -> bool:
        """Has a majority fetched within ``window_ms`` (the leader counts itself)?"""
        since = now_ms - window_ms
        heard = (self.node_id in self.voters) + sum(
            1 for v in self.voters
            if v != self.node_id and self.progress[v].last_fetch_ms >= max(since, self.started_ms)
        )
        if self.started_ms > since:
            return True  # a new leader gets a full window before it is judged
        return heard * 2 > len(self.voters)

    def successors(self) -> tuple[int, ...]:
        """Voters by end offset, most caught up first (EndQuorumEpoch's ranking)."""
        others = [v for v in self.voters if v != self.node_id]
        return tuple(sorted(others, key=lambda v: (-self.progress[v].end_offset, v)))

    def describe(self, leader_end: int, now_ms: int,
                 leader_directory: uuid.UUID = NO_DIRECTORY) -> list[ReplicaInfo]:
        rows = [ReplicaInfo(self.node_id, leader_end, now_ms, now_ms, leader_directory)]
        for node_id in sorted(self.progress):
            p = self.progress[node_id]
            directory = self.directories.get(node_id, p.directory_id)
            rows.append(ReplicaInfo(node_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms,
                                    directory))
        return rows

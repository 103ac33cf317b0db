"""The Raft core's roles, errors and timers (re-exported by :mod:`odradek.raft.node`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    FOLLOWER = "Follower"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    RESIGNED = "Resigned"


class RaftFatalError(Exception):
    """The node would have to break a safety rule (truncate committed data)."""


class NotLeaderError(Exception):
    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's ``controller.quorum.*`` timers, in milliseconds."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    election_backoff_max_ms: int = 1000
    max_fetch_entries: int = 64

"""The voter-set side of :class:`odradek.raft.node.RaftNode` (KIP-853), as a mixin.

The node's voter set is the latest VotersRecord in its log (a
:class:`~odradek.raft.voters.VoterHistory` kept in step with every append,
truncation and snapshot), else the static or bootstrap set it was built with;
the leader's changes go through the rules of :mod:`odradek.raft.membership`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from odradek.raft.log import Entry, RaftLog, Snapshot
from odradek.raft.membership import check_add, check_remove
from odradek.raft.roles import NotLeaderError, RaftConfig, Role
from odradek.raft.voters import (
    Voter,
    VoterHistory,
    VoterSet,
    frame_snapshot,
    unframe_snapshot,
    voters_record,
)

if TYPE_CHECKING:
    from odradek.raft.leader import LeaderState


class VoterSetMixin:
    node_id: int
    directory_id: uuid.UUID
    history: VoterHistory
    _dynamic: bool
    log: RaftLog
    config: RaftConfig
    role: Role
    epoch: int
    leader_id: int
    high_watermark: int
    leader_state: LeaderState | None
    _leader_hw_known: bool

    def _leader_progress(self, now_ms: int) -> None:
        raise NotImplementedError

    @property
    def voters(self) -> frozenset[int]:
        """The ids of the voter set in force: the latest in the log (KIP-853)."""
        return self.history.latest().ids

    @property
    def voter_set(self) -> VoterSet:
        return self.history.latest()

    @property
    def kraft_version(self) -> int:
        return 1 if self._dynamic else self.history.kraft_version

    @property
    def is_voter(self) -> bool:
        return self.voter_set.has(self.node_id, self.directory_id) or (
            self.kraft_version == 0 and self.node_id in self.voters)

    @property
    def may_stand(self) -> bool:
        """May this node stand for election? A voter may, and so may a node whose
        removal is not committed yet (as far as it knows) if the set before it
        had it: it may hold entries the remaining voters lack and refuse them
        their votes, so it must be able to lead and commit the change itself
        (the Raft thesis, §4.2.2)."""
        if self.is_voter:
            return True
        if self.kraft_version == 0 or not self.voter_change_pending():
            return False
        return self.history.previous().has(self.node_id, self.directory_id)

    def add_voter(self, voter: Voter, now_ms: int) -> int:
        """Leader: append a VotersRecord adding ``voter``; returns the offset after
        it (the change is done once committed). :class:`VoterChangeError` when a
        KIP-853 rule forbids it now (see :mod:`odradek.raft.membership`)."""
        self._check_leader()
        assert self.leader_state is not None
        check_add(self, self.leader_state, voter, now_ms)
        return self._append_voters(self.voter_set.adding(voter), now_ms)

    def remove_voter(self, node_id: int, directory_id: uuid.UUID, now_ms: int) -> int:
        """Leader: append a VotersRecord without ``(node_id, directory_id)``."""
        self._check_leader()
        check_remove(self, node_id, directory_id)
        return self._append_voters(self.voter_set.removing(node_id), now_ms)

    def voter_change_pending(self) -> bool:
        """Is a VotersRecord in the log not yet committed?"""
        return self.history.last_change_offset() >= self.high_watermark

    def leader_committed_in_epoch(self) -> bool:
        return self.role is Role.LEADER and self._leader_hw_known

    def _check_leader(self) -> None:
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id, self.epoch)

    def _append_voters(self, voters: VoterSet, now_ms: int) -> int:
        entry = Entry(self.log.end_offset, self.epoch, (voters_record(voters),), control=True)
        self._append([entry])
        self._leader_progress(now_ms)
        return entry.end

    def take_snapshot(self, end_offset: int, payload: bytes) -> Snapshot:
        """Replace the log below ``end_offset`` by a snapshot of ``payload`` and the
        voter set in force there (see :func:`odradek.raft.voters.frame_snapshot`)."""
        voters = self.history.at(end_offset)
        snap = self.log.take_snapshot(end_offset, frame_snapshot(voters, payload))
        self.history.reset(voters, end_offset)
        return snap

    def snapshot_payload(self) -> bytes | None:
        """The shell's payload of the log's snapshot (None: no snapshot)."""
        snap = self.log.snapshot()
        return None if snap is None else unframe_snapshot(snap.payload)[1]

    def _load_history(self) -> None:
        snap = self.log.snapshot()
        if snap is not None:
            self.history.reset(unframe_snapshot(snap.payload)[0], snap.end_offset)
        offset = self.log.start_offset
        while offset < self.log.end_offset:
            entries = self.log.read(offset, 256)
            if not entries:
                break
            for e in entries:
                if e.control:
                    self.history.observe(e.offset, e.records)
            offset = entries[-1].end

    def _directories(self) -> dict[int, uuid.UUID]:
        return {v.node_id: v.directory_id for v in self.voter_set.voters}

    def _append(self, entries: list[Entry]) -> None:
        before = self.voters
        self.log.append(entries)
        for e in entries:
            if e.control:
                self.history.observe(e.offset, e.records)
        if self.leader_state is not None and self.voters != before:
            self.leader_state.set_voters(self.voters, self._directories())

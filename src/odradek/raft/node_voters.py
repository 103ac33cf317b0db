"""The voter-set side of :class:`odradek.raft.node.RaftNode` (KIP-853), as a mixin.

The node's voter set is the latest VotersRecord in its log (a
:class:`~odradek.raft.voters.VoterHistory` kept in step with every append,
truncation and snapshot), else the static or bootstrap set it was built with;
the leader's changes go through the rules of :mod:`odradek.raft.membership`.

Endpoint updates (KIP-853's UpdateRaftVoter): a node knows its own controller
endpoints (:attr:`VoterSetMixin.endpoints`). A follower that is a voter of a
``kraft.version`` 1 log, whose voter set shows other endpoints (or another
``kraft.version`` range) for it, sends the leader an
:class:`~odradek.raft.messages.UpdateVoterRequest`, and again after a back-off
until the leader accepts one in the current epoch (once per leader epoch, as
Kafka's followers do); it checks on every successful fetch, so a view behind
the leader's is corrected as it catches up. A leader whose own record is stale
writes the update itself once the rules let it. The leader answers at once,
after appending the VotersRecord (Kafka does not wait for the commit either).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from odradek.raft.log import Entry, RaftLog, Snapshot
from odradek.raft.membership import (
    VoterChangeError,
    check_add,
    check_remove,
    check_update,
    check_upgrade,
)
from odradek.raft.messages import Message, UpdateVoterRequest, UpdateVoterResponse
from odradek.raft.roles import NotLeaderError, RaftConfig, Role
from odradek.raft.voters import (
    SUPPORTED_KRAFT_VERSIONS,
    Endpoint,
    Voter,
    VoterHistory,
    VoterSet,
    frame_snapshot,
    kraft_version_record,
    unframe_snapshot,
    voters_record,
)
from odradek.wire.errors import ErrorCode

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
    outbox: list[Message]
    endpoints: tuple[Endpoint, ...]
    _update_epoch: int
    _update_pending: int
    _update_due: int

    def _leader_progress(self, now_ms: int) -> None:
        raise NotImplementedError

    def _known_leader(self) -> int:
        raise NotImplementedError

    def _init_updates(self, endpoints: tuple[Endpoint, ...]) -> None:
        self.endpoints = endpoints
        """This node's controller endpoints, the first on the controller listener
        (empty: unknown, never sent)."""
        self._update_epoch = -1  # the epoch whose leader accepted our endpoints
        self._update_pending = -1  # when the UpdateVoterRequest in flight times out
        self._update_due = 0  # not before this (a back-off after a refusal)

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

    def _own_record_stale(self) -> bool:
        """Is this node a voter of a ``kraft.version`` 1 set that shows other
        endpoints or another range for it than its own?"""
        if not self.endpoints or self.kraft_version == 0:
            return False
        v = self.voter_set.get(self.node_id)
        return (v is not None and v.directory_id == self.directory_id
                and (v.endpoints, v.kraft_versions) != (self.endpoints,
                                                        SUPPORTED_KRAFT_VERSIONS))

    def _maybe_send_update(self, now_ms: int) -> None:
        """Follower: ask the leader to record this node's endpoints (see above)."""
        if (self.role is not Role.FOLLOWER or self._update_epoch == self.epoch
                or now_ms < self._update_due or now_ms < self._update_pending
                or not self._own_record_stale()):
            return
        self.outbox.append(UpdateVoterRequest(self.node_id, self.leader_id, self.epoch,
                                              self.directory_id, self.endpoints))
        self._update_pending = now_ms + self.config.request_timeout_ms

    def _on_update_voter_response(self, resp: UpdateVoterResponse, now_ms: int) -> None:
        if resp.epoch != self.epoch or resp.src != self.leader_id:
            return  # another epoch's answer: the new leader is asked afresh
        self._update_pending = -1
        if resp.error:
            self._update_due = now_ms + self.config.request_timeout_ms // 4
        else:
            self._update_epoch = self.epoch

    def _on_update_voter_request(self, req: UpdateVoterRequest, now_ms: int) -> None:
        """Leader: record a voter's new endpoints (membership.check_update)."""
        error = 0
        if self.role is not Role.LEADER:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.epoch < self.epoch
                     else ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif req.epoch != self.epoch:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.epoch < self.epoch
                     else ErrorCode.UNKNOWN_LEADER_EPOCH)
        else:
            try:
                voters = check_update(self, Voter(req.src, req.directory_id, req.endpoints,
                                                  req.kraft_versions), self.endpoints)
            except VoterChangeError as exc:
                error = exc.code
            else:
                if voters is not None:
                    self._append_voters(voters, now_ms)
        self.outbox.append(UpdateVoterResponse(self.node_id, req.src, self.epoch,
                                               self._known_leader(), error))

    def _maybe_update_self(self, now_ms: int) -> None:
        """Leader: a stale record of its own endpoints is updated like a follower's."""
        if self._own_record_stale():
            try:
                voters = check_update(self, Voter(self.node_id, self.directory_id,
                                                  self.endpoints), self.endpoints)
            except VoterChangeError:
                return  # not now: the next poll looks again
            if voters is not None:
                self._append_voters(voters, now_ms)

    def upgrade_kraft_version(self, version: int, endpoints: dict[int, tuple[Endpoint, ...]],
                              now_ms: int, *, validate_only: bool = False) -> int:
        """Leader: raise ``kraft.version`` to ``version`` (0 → 1: the static voters
        become a VotersRecord, see :func:`odradek.raft.membership.check_upgrade`);
        returns the offset after the entry written (-1: nothing to write, or
        ``validate_only``). :class:`VoterChangeError` when a rule forbids it now."""
        self._check_leader()
        assert self.leader_state is not None
        voters = check_upgrade(self, self.leader_state, version, endpoints)
        if voters is None or validate_only:
            return -1
        entry = Entry(self.log.end_offset, self.epoch,
                      (kraft_version_record(version), voters_record(voters)), control=True)
        self._append([entry])
        self._leader_progress(now_ms)
        return entry.end

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
        before = self.voter_set
        self.log.append(entries)
        for e in entries:
            if e.control:
                self.history.observe(e.offset, e.records)
        if self.leader_state is not None and self.voter_set != before:
            self.leader_state.set_voters(self.voters, self._directories())

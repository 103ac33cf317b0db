"""A KRaft node as a pure state machine: messages and time in, messages out.

No IO, no clock, no randomness of its own: the shell (or the simulation) calls
:meth:`RaftNode.handle` with each message, :meth:`RaftNode.poll` when
:meth:`RaftNode.next_deadline` passes, and sends what :meth:`RaftNode.take_outbox`
returns. The log and the quorum-state store are injected, so are the random
source and ``now_ms`` on every call.

Roles (Kafka's ``QuorumState``, 4.0 with pre-vote, KIP-996):

* **Unattached**: no leader known in this epoch (maybe voted). After a random
  election timeout a voter becomes Prospective.
* **Follower**: fetches from the leader. Without a successful Fetch for
  ``fetch_timeout_ms`` a voter becomes Prospective.
* **Prospective**: asks for pre-votes (no epoch bump, nothing persisted); a
  majority makes it Candidate, a refusal or a timeout sends it back.
* **Candidate**: bumps the epoch, votes for itself (persisted), asks for votes;
  a majority makes it Leader.
* **Leader**: appends a LeaderChange entry, sends BeginQuorumEpoch until each
  voter has answered or fetched, answers Fetch, moves the high watermark;
  resigns when check-quorum fails.
* **Resigned**: a leader that gave up (or restarted): sends EndQuorumEpoch and
  waits an election timeout before standing again.

Observers (nodes not in ``voters``: brokers) are only ever Unattached or
Follower; they find the leader by fetching from any voter.

Safety rests on: the persisted vote (one vote per epoch), the log comparison
``(last epoch, end offset)`` when voting, the high watermark counting only
flushed ends, and followers never truncating below their high watermark
(:class:`RaftFatalError` if asked to: the log would lose committed data).
"""

from __future__ import annotations

import random
import uuid

from odradek.raft.leader import LeaderState, ReplicaInfo
from odradek.raft.leader import ReplicaProgress as LeaderProgress
from odradek.raft.log import Entry, RaftLog
from odradek.raft.messages import (
    BeginEpochRequest,
    BeginEpochResponse,
    EndEpochRequest,
    EndEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.node_voters import VoterSetMixin
from odradek.raft.quorum_state import ElectionState, QuorumStateStore
from odradek.raft.roles import NotLeaderError, RaftConfig, RaftFatalError, Role
from odradek.raft.voters import (
    NO_DIRECTORY,
    Endpoint,
    VoterHistory,
    VoterSet,
    kraft_version_record,
    unframe_snapshot,
    voters_record,
)
from odradek.wire.errors import ErrorCode

__all__ = ["LEADER_CHANGE", "NotLeaderError", "RaftConfig", "RaftFatalError", "RaftNode",
           "Role"]

LEADER_CHANGE = b"leader-change"
"""The record of a LeaderChange entry (the shell writes Kafka's control record)."""


class RaftNode(VoterSetMixin):
    def __init__(
        self, node_id: int, voters: frozenset[int] | VoterSet, log: RaftLog,
        store: QuorumStateStore, rng: random.Random, config: RaftConfig, now_ms: int, *,
        directory_id: uuid.UUID = NO_DIRECTORY, bootstrap_ids: frozenset[int] = frozenset(),
        endpoints: tuple[Endpoint, ...] = (),
    ) -> None:
        """``voters``: the static ``controller.quorum.voters`` (a set of ids,
        ``kraft.version`` 0), or a bootstrap :class:`VoterSet` (``kraft.version``
        1: the first leader of an empty log writes it as a VotersRecord). Either
        way the latest VotersRecord in the log wins. ``bootstrap_ids``: whom an
        observer with no voter set known fetches from to find the leader.
        ``endpoints``: this node's controller endpoints (a voter keeps its record
        in the voter set up to date with them, see :mod:`odradek.raft.node_voters`)."""
        self.node_id = node_id
        self.directory_id = directory_id
        dynamic = isinstance(voters, VoterSet)
        self.bootstrap_voters = voters if isinstance(voters, VoterSet) else None
        self.history = VoterHistory(voters if isinstance(voters, VoterSet)
                                    else VoterSet.static(voters))
        self._dynamic = dynamic
        self.bootstrap_ids = bootstrap_ids
        self.log = log
        self._load_history()
        self.store = store
        self.rng = rng
        self.config = config
        self.outbox: list[Message] = []
        self.high_watermark = log.start_offset
        self.hw_from_leader = False
        """Has this node learned a high watermark from a leader of some epoch (its
        own, once it leads) since it started? Until then its log's committed part
        is unknown. A leader tells its high watermark only once it has committed
        an entry of its own epoch (before that it answers -1, as KRaft's leaders
        do), so the first one learned covers everything committed before."""
        self.first_leader_hw = -1
        """The first high watermark learned from a leader in this life (see
        :meth:`caught_up`)."""
        self.recovered_end = log.end_offset
        """The log end this node started with, lowered by any truncation since:
        what it may have applied before it stopped. :meth:`caught_up` waits for
        it too, so a restarted node never acts on less metadata than it had."""
        self._leader_hw_known = False
        """Leader: has the high watermark passed this epoch's start (so it may be told)?"""
        self.leader_state: LeaderState | None = None
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        self._deadline = 0  # the role's timer: election, fetch or check-quorum
        self._fetch_due = 0  # follower: when to send the next Fetch
        self._fetch_pending: tuple[int, int] | None = None  # (offset, deadline)
        self._last_fetch_ok = -1
        self._parked: dict[int, tuple[FetchRequest, int]] = {}  # leader: long polls
        self._successors: tuple[int, ...] = ()
        self._init_updates(endpoints)
        state = store.read() or ElectionState()
        self.epoch, self.leader_id, self.voted_id = state.epoch, state.leader_id, state.voted_id
        self.role = Role.UNATTACHED
        if state.leader_id == node_id and self.may_stand:
            self._resign(now_ms, persist=False)
        elif state.leader_id >= 0:
            self._become_follower(state.epoch, state.leader_id, now_ms, persist=False)
        else:
            self._become_unattached(state.epoch, state.voted_id, now_ms, persist=False)

    # -- public surface ----------------------------------------------------------

    def caught_up(self, applied: int) -> bool:
        """Has a node that applied every entry below ``applied`` caught up with the
        quorum? Only once it learned a high watermark from a leader that had
        committed in its epoch, applied up to it, and applied at least what its
        log held when it started (:attr:`recovered_end`)."""
        return (self.hw_from_leader and applied >= self.first_leader_hw
                and applied >= min(self.recovered_end, self.log.end_offset))

    @property
    def advertised_high_watermark(self) -> int:
        """The high watermark this node tells others: a leader's once it has
        committed in its epoch, else -1 (unknown)."""
        return self.high_watermark if self.role is Role.LEADER and self._leader_hw_known else -1

    def take_outbox(self) -> list[Message]:
        out, self.outbox = self.outbox, []
        return out

    def next_deadline(self) -> int:
        searching = self.role is Role.UNATTACHED and not self.may_stand
        deadlines = [] if searching else [self._deadline]  # an observer never stands
        if self.role is Role.FOLLOWER or searching:
            deadlines.append(self._fetch_pending[1] if self._fetch_pending else self._fetch_due)
        if self.role is Role.LEADER:
            deadlines.extend(d for _, d in self._parked.values())
            if self.log.flushed_offset < self.log.end_offset:
                deadlines.append(0)  # due now: flush
        return min(deadlines)

    def propose(self, records: list[bytes], now_ms: int) -> int:
        """Append ``records`` as one entry if leader; returns the offset after it
        (committed once the high watermark reaches it). :class:`NotLeaderError` else."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id, self.epoch)
        entry = Entry(self.log.end_offset, self.epoch, tuple(records))
        self._append([entry])
        self._leader_progress(now_ms)  # wakes long polls; the HW waits for the flush
        return entry.end

    def describe(self, now_ms: int) -> list[ReplicaInfo]:
        """DescribeQuorum's replica rows (leader only; empty elsewhere)."""
        if self.leader_state is None:
            return []
        return self.leader_state.describe(self.log.end_offset, now_ms, self.directory_id)

    def resign(self, now_ms: int) -> None:
        """Graceful hand-over (controlled shutdown of the active controller)."""
        if self.role is Role.LEADER:
            self._resign(now_ms, persist=False)

    def poll(self, now_ms: int) -> None:
        role = self.role
        if role is Role.LEADER:
            self._poll_leader(now_ms)
        elif role is Role.FOLLOWER or (role is Role.UNATTACHED and not self.may_stand):
            self._poll_fetcher(now_ms)
        elif now_ms >= self._deadline:
            if role is Role.RESIGNED:
                for voter in self._others():
                    self.outbox.append(EndEpochRequest(self.node_id, voter, self.epoch,
                                                       self._successors))
                self._become_prospective(now_ms)
            elif role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE):
                self._become_prospective(now_ms)

    def handle(self, msg: Message, now_ms: int) -> None:
        if isinstance(msg, VoteRequest):
            self._on_vote_request(msg, now_ms)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(msg, now_ms)
        elif isinstance(msg, FetchRequest):
            self._on_fetch_request(msg, now_ms)
        elif isinstance(msg, FetchResponse):
            self._on_fetch_response(msg, now_ms)
        elif isinstance(msg, BeginEpochRequest):
            self._on_begin_epoch(msg, now_ms)
        elif isinstance(msg, EndEpochRequest):
            self._on_end_epoch(msg, now_ms)
        elif isinstance(msg, FetchSnapshotRequest):
            self._on_fetch_snapshot_request(msg)
        elif isinstance(msg, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(msg, now_ms)
        elif isinstance(msg, BeginEpochResponse | EndEpochResponse):
            self._on_epoch_ack(msg, now_ms)
        elif isinstance(msg, UpdateVoterRequest):
            self._on_update_voter_request(msg, now_ms)
        elif isinstance(msg, UpdateVoterResponse):
            self._on_update_voter_response(msg, now_ms)

    # -- transitions ---------------------------------------------------------------

    def _persist(self) -> None:
        self.store.write(ElectionState(self.epoch, self.leader_id, self.voted_id))

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    def _known_leader(self) -> int:
        if self.leader_id == self.node_id and self.role is not Role.LEADER:
            return -1  # resigned, or standing again after leading
        return self.leader_id

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.node_id})

    def _reset_common(self) -> None:
        self.leader_state = None
        self._parked.clear()
        self._fetch_pending = None
        self._granted.clear()
        self._rejected.clear()
        self._update_pending = -1

    def _become_unattached(self, epoch: int, voted: int, now_ms: int, *, persist: bool = True,
                           ) -> None:
        self._reset_common()
        self.role, self.epoch, self.leader_id, self.voted_id = Role.UNATTACHED, epoch, -1, voted
        self._deadline = now_ms + self._election_timeout()
        self._fetch_due = now_ms
        if persist:
            self._persist()

    def _become_follower(self, epoch: int, leader: int, now_ms: int, *, persist: bool = True,
                         ) -> None:
        voted = self.voted_id if epoch == self.epoch else -1
        self._reset_common()
        self.role, self.epoch, self.leader_id, self.voted_id = Role.FOLLOWER, epoch, leader, voted
        self._deadline = now_ms + self.config.fetch_timeout_ms
        self._last_fetch_ok = -1
        self._fetch_due = now_ms
        if persist:
            self._persist()

    def _become_prospective(self, now_ms: int) -> None:
        if not self.may_stand:
            if self.role is not Role.UNATTACHED:  # a removed voter goes back to observing
                self._become_unattached(self.epoch, -1, now_ms, persist=False)
            return
        leader = self.leader_id
        self._reset_common()
        self.role = Role.PROSPECTIVE
        self.leader_id = leader  # remembered: a refusal sends it back to following
        self._granted.add(self.node_id)
        self._deadline = now_ms + self._election_timeout()
        self._ask_votes(self.epoch + 1, pre_vote=True)
        self._maybe_won(now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        self._reset_common()
        self.role, self.epoch, self.leader_id, self.voted_id = (
            Role.CANDIDATE, self.epoch + 1, -1, self.node_id)
        self._persist()
        self._granted.add(self.node_id)
        self._deadline = now_ms + self._election_timeout()
        self._ask_votes(self.epoch, pre_vote=False)
        self._maybe_won(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        self._reset_common()
        self.role, self.leader_id = Role.LEADER, self.node_id
        self._persist()
        self._leader_hw_known = False
        start = self.log.end_offset
        self.leader_state = LeaderState(self.node_id, self.epoch, start, self.voters, now_ms,
                                        directories=self._directories())
        records = [LEADER_CHANGE]
        if self._dynamic and self.history.kraft_version == 0 and self.bootstrap_voters:
            # The first leader of a log bootstrapped with kraft.version 1 writes it.
            records += [kraft_version_record(1), voters_record(self.bootstrap_voters)]
        self._append([Entry(start, self.epoch, tuple(records), control=True)])
        self._deadline = now_ms + self.config.fetch_timeout_ms * 3 // 2
        self._send_begin_epoch(now_ms)
        self._leader_progress(now_ms)

    def _resign(self, now_ms: int, *, persist: bool) -> None:
        successors = self.leader_state.successors() if self.leader_state else ()
        self._reset_common()
        self.role, self.leader_id = Role.RESIGNED, self.node_id
        self._successors = successors
        if persist:
            self._persist()
        for voter in self._others():
            self.outbox.append(EndEpochRequest(self.node_id, voter, self.epoch, successors))
        self._deadline = now_ms + self._election_timeout()

    def _observe_epoch(self, epoch: int, leader: int, now_ms: int) -> bool:
        """React to a message from a newer epoch, or naming the leader of ours.
        Returns False when the message is from an older epoch (to be refused)."""
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            if leader >= 0 and leader != self.node_id:
                self._become_follower(epoch, leader, now_ms)
            else:
                self._become_unattached(epoch, -1, now_ms)
        elif leader not in (-1, self.node_id, self.leader_id) and self.role in (
            Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE
        ):
            # A Prospective that still remembers this leader (it stopped hearing
            # from it) is not sent back by others who remember it too (KIP-996).
            self._become_follower(epoch, leader, now_ms)
        return True

    # -- voting -------------------------------------------------------------------

    def _ask_votes(self, epoch: int, *, pre_vote: bool) -> None:
        vs = self.voter_set
        for voter in self._others():
            v = vs.get(voter)
            self.outbox.append(VoteRequest(self.node_id, voter, epoch, self.log.last_epoch,
                                           self.log.end_offset, pre_vote,
                                           v.directory_id if v else NO_DIRECTORY))

    def _log_ok(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _on_vote_request(self, req: VoteRequest, now_ms: int) -> None:
        granted = False
        if req.voter_directory_id not in (NO_DIRECTORY, self.directory_id):
            pass  # addressed to this id's former directory (a wiped disk): refuse
        elif self.kraft_version == 1 or (req.src in self.voters and self.is_voter):
            # KIP-853: a replica's voter set may lag the candidate's, so with
            # kraft.version 1 anyone votes; the candidate counts only its voters.
            if req.pre_vote:
                granted = self._grant_pre_vote(req, now_ms)
            else:
                granted = self._grant_vote(req, now_ms)
        self.outbox.append(VoteResponse(self.node_id, req.src, self.epoch, self._known_leader(),
                                        granted, req.pre_vote,
                                        0 if granted or req.src in self.voters else
                                        ErrorCode.INCONSISTENT_VOTER_SET))

    def _grant_pre_vote(self, req: VoteRequest, now_ms: int) -> bool:
        if req.epoch <= self.epoch or self.role is Role.LEADER:
            return False
        recently_fetched = (self.role is Role.FOLLOWER and self._last_fetch_ok >= 0
                            and now_ms - self._last_fetch_ok < self.config.fetch_timeout_ms)
        return not recently_fetched and self._log_ok(req.last_epoch, req.end_offset)

    def _grant_vote(self, req: VoteRequest, now_ms: int) -> bool:
        if req.epoch < self.epoch:
            return False
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, -1, now_ms)
        if self.role is not Role.UNATTACHED or self.voted_id not in (-1, req.src):
            return False
        if not self._log_ok(req.last_epoch, req.end_offset):
            return False
        if self.voted_id != req.src:
            self.voted_id = req.src
            self._persist()
        self._deadline = now_ms + self._election_timeout()
        return True

    def _on_vote_response(self, resp: VoteResponse, now_ms: int) -> None:
        if resp.epoch > self.epoch or (resp.epoch == self.epoch and resp.leader_id not in (
                -1, self.node_id, self.leader_id)):
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            return
        expected = Role.PROSPECTIVE if resp.pre_vote else Role.CANDIDATE
        if self.role is not expected or resp.src not in self.voters:
            return
        if not resp.pre_vote and resp.epoch != self.epoch:
            return
        (self._granted if resp.granted else self._rejected).add(resp.src)
        if len(self._rejected) >= len(self.voters) - len(self.voters) // 2:
            # A majority refused: back off, then stand again (via Prospective).
            if self.role is Role.PROSPECTIVE and self.leader_id >= 0:
                # Back to following; a live leader's next answer resets the timer,
                # but if it is gone, stand again after a backoff rather than a
                # whole fetch timeout (the others may just not have noticed yet).
                self._become_follower(self.epoch, self.leader_id, now_ms, persist=False)
                self._deadline = now_ms + self._backoff()
            else:
                self._deadline = now_ms + self._backoff()
                self._rejected.clear()
                self._granted = {self.node_id}
            return
        self._maybe_won(now_ms)

    def _backoff(self) -> int:
        cap = self.config.election_backoff_max_ms
        return min(cap, self.config.election_timeout_ms // 2 + self.rng.randrange(cap))

    def _maybe_won(self, now_ms: int) -> None:
        if len(self._granted & self.voters) * 2 <= len(self.voters):
            return
        if self.role is Role.PROSPECTIVE:
            self._become_candidate(now_ms)
        elif self.role is Role.CANDIDATE:
            self._become_leader(now_ms)

    # -- leader --------------------------------------------------------------------

    def _needs_begin_epoch(self, p: LeaderProgress, now_ms: int) -> bool:
        """A voter that has not answered, or has not fetched for half a fetch
        timeout, is told (again) who leads: it may not know, or may have moved to a
        higher epoch without a leader, whose answer then makes this leader step
        down (Kafka resends BeginQuorumEpoch the same way, KAFKA-16526)."""
        resend = self.config.fetch_timeout_ms // 2
        if now_ms - p.begin_sent_ms < resend:
            return False
        return not p.acknowledged or now_ms - p.last_fetch_ms >= resend

    def _send_begin_epoch(self, now_ms: int) -> None:
        assert self.leader_state is not None
        for voter, p in self.leader_state.progress.items():
            if voter in self.voters and self._needs_begin_epoch(p, now_ms):
                self.outbox.append(BeginEpochRequest(self.node_id, voter, self.epoch))
                p.begin_sent_ms = now_ms

    def _poll_leader(self, now_ms: int) -> None:
        state = self.leader_state
        assert state is not None
        if self.log.flushed_offset < self.log.end_offset:
            self.log.flush()  # one fsync for everything appended since the last poll
            self._leader_progress(now_ms)
            if self.role is not Role.LEADER:
                return
        window = self.config.fetch_timeout_ms * 3 // 2
        if now_ms >= self._deadline:
            if not state.has_quorum(now_ms, window):
                self._resign(now_ms, persist=False)
                return
            self._deadline = now_ms + self.config.fetch_timeout_ms // 2
        self._send_begin_epoch(now_ms)
        self._maybe_update_self(now_ms)
        for replica, (req, deadline) in list(self._parked.items()):
            if now_ms >= deadline:
                del self._parked[replica]
                self._answer_fetch(req, now_ms)

    def _leader_progress(self, now_ms: int) -> None:
        """The log or a replica moved: maybe advance the HW, wake long polls."""
        state = self.leader_state
        assert state is not None
        hw = state.new_high_watermark(self.log.flushed_offset, self.high_watermark)
        if hw is not None:
            self.high_watermark = hw
            self._learned_hw(hw)
            self._leader_hw_known = True
            if not self.is_voter and not self.voter_change_pending():
                self._resign(now_ms, persist=False)  # its own removal committed
                return
        for replica, (req, _) in list(self._parked.items()):
            if hw is not None or self.log.end_offset > req.fetch_offset:
                del self._parked[replica]
                self._answer_fetch(req, now_ms)

    def _on_fetch_request(self, req: FetchRequest, now_ms: int) -> None:
        if self.role is not Role.LEADER:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.epoch < self.epoch
                     else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.outbox.append(FetchResponse(self.node_id, req.src, self.epoch,
                                             self._known_leader(), req.fetch_offset, error=error))
            return
        if req.epoch != self.epoch:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.epoch < self.epoch
                     else ErrorCode.UNKNOWN_LEADER_EPOCH)
            self.outbox.append(FetchResponse(self.node_id, req.src, self.epoch, self.node_id,
                                             req.fetch_offset, error=error))
            return
        self._parked.pop(req.src, None)
        reply = self._validate_fetch(req)
        if reply is not None:
            self.outbox.append(reply)
            return
        assert self.leader_state is not None
        self.leader_state.record_fetch(req.src, req.fetch_offset, self.log.end_offset, now_ms,
                                       req.directory_id)
        self._leader_progress(now_ms)
        if self.leader_state is None:
            return  # its own removal just committed: it resigned (the fetcher asks again)
        known_hw = self.leader_state.progress[req.src].sent_high_watermark
        if (req.fetch_offset >= self.log.end_offset and self.config.fetch_max_wait_ms > 0
                and known_hw >= self.advertised_high_watermark):
            self._parked[req.src] = (req, now_ms + self.config.fetch_max_wait_ms)
        else:
            self._answer_fetch(req, now_ms)

    def _validate_fetch(self, req: FetchRequest) -> FetchResponse | None:
        """A diverging epoch or a snapshot id when the follower's log parts from ours."""
        log = self.log
        if req.fetch_offset < log.start_offset:
            snap = log.snapshot()
            assert snap is not None
            return FetchResponse(self.node_id, req.src, self.epoch, self.node_id,
                                 req.fetch_offset, self.advertised_high_watermark,
                                 snapshot_id=(snap.end_offset, snap.epoch))
        if req.fetch_offset == 0:
            return None
        epoch, end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if epoch != req.last_fetched_epoch or end < req.fetch_offset:
            if epoch < 0 < log.start_offset:
                snap = log.snapshot()
                assert snap is not None
                return FetchResponse(self.node_id, req.src, self.epoch, self.node_id,
                                     req.fetch_offset, self.advertised_high_watermark,
                                     snapshot_id=(snap.end_offset, snap.epoch))
            return FetchResponse(self.node_id, req.src, self.epoch, self.node_id,
                                 req.fetch_offset, self.advertised_high_watermark,
                                 diverging=(epoch, end))
        return None

    def _answer_fetch(self, req: FetchRequest, now_ms: int) -> None:
        entries = self.log.read(req.fetch_offset, self.config.max_fetch_entries)
        if entries and entries[0].offset != req.fetch_offset:
            entries = []  # not a boundary of our log: the next fetch diverges
        hw = self.advertised_high_watermark
        if self.leader_state is not None and req.src in self.leader_state.progress:
            self.leader_state.progress[req.src].sent_high_watermark = hw
        self.outbox.append(FetchResponse(self.node_id, req.src, self.epoch, self.node_id,
                                         req.fetch_offset, hw, tuple(entries)))

    def _on_fetch_snapshot_request(self, req: FetchSnapshotRequest) -> None:
        snap = self.log.snapshot()
        if self.role is not Role.LEADER or req.epoch != self.epoch:
            self.outbox.append(FetchSnapshotResponse(
                self.node_id, req.src, self.epoch, self._known_leader(),
                error=ErrorCode.FENCED_LEADER_EPOCH if req.epoch < self.epoch
                else ErrorCode.NOT_LEADER_OR_FOLLOWER))
        elif snap is None or (snap.end_offset, snap.epoch) != req.snapshot_id:
            self.outbox.append(FetchSnapshotResponse(self.node_id, req.src, self.epoch,
                                                     self.node_id,
                                                     error=ErrorCode.SNAPSHOT_NOT_FOUND))
        else:
            self.outbox.append(FetchSnapshotResponse(self.node_id, req.src, self.epoch,
                                                     self.node_id, snap))

    def _on_epoch_ack(self, resp: BeginEpochResponse | EndEpochResponse, now_ms: int) -> None:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
        elif (isinstance(resp, BeginEpochResponse) and self.role is Role.LEADER
              and resp.epoch == self.epoch and not resp.error and self.leader_state):
            progress = self.leader_state.progress.get(resp.src)
            if progress is not None:
                progress.acknowledged = True

    # -- follower ------------------------------------------------------------------

    def _on_begin_epoch(self, req: BeginEpochRequest, now_ms: int) -> None:
        if (req.epoch > self.epoch or (req.epoch == self.epoch and self.role in (
                Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE))) and (
                req.src in self.voters or self.kraft_version == 1):
            self._become_follower(req.epoch, req.src, now_ms)
        error = 0 if req.epoch >= self.epoch else ErrorCode.FENCED_LEADER_EPOCH
        self.outbox.append(BeginEpochResponse(self.node_id, req.src, self.epoch,
                                              self._known_leader(), error))

    def _on_end_epoch(self, req: EndEpochRequest, now_ms: int) -> None:
        if req.epoch > self.epoch and self.may_stand:
            self._become_unattached(req.epoch, -1, now_ms)
        if (req.epoch == self.epoch and self.may_stand and self.leader_id in (req.src, -1)
                and self.role in (Role.FOLLOWER, Role.UNATTACHED)):
            # The leader resigned: stand after a wait set by our rank among its successors.
            successors = req.successors
            rank = successors.index(self.node_id) if self.node_id in successors else -1
            self._become_unattached(self.epoch, self.voted_id, now_ms, persist=False)
            if rank == 0:
                self._deadline = now_ms
            elif rank > 0:
                cap = self.config.election_backoff_max_ms
                self._deadline = now_ms + cap * rank // len(successors) + self.rng.randrange(
                    max(1, cap // (2 * len(successors))))
        self.outbox.append(EndEpochResponse(self.node_id, req.src, self.epoch,
                                            self._known_leader()))

    def _fetch_target(self) -> int:
        if self.role is Role.FOLLOWER:
            return self.leader_id
        # An observer looking for the leader (a new controller knows only its bootstrap).
        return self.rng.choice(sorted(self.voters - {self.node_id} or self.bootstrap_ids
                                      or self.voters))

    def _poll_fetcher(self, now_ms: int) -> None:
        if self.role is Role.FOLLOWER and now_ms >= self._deadline:
            if self.may_stand:
                self._become_prospective(now_ms)
            else:  # an observer whose leader went quiet looks for the leader again
                self._become_unattached(self.epoch, -1, now_ms, persist=False)
            return
        if self._fetch_pending is not None:
            if now_ms < self._fetch_pending[1]:
                return
            self._fetch_pending = None  # timed out: ask again
        if now_ms < self._fetch_due:
            return
        self.log.flush()  # the offset we report must survive a crash
        offset = self.log.end_offset
        self.outbox.append(FetchRequest(self.node_id, self._fetch_target(), self.epoch, offset,
                                        self.log.last_epoch, self.directory_id))
        timeout = self.config.request_timeout_ms + self.config.fetch_max_wait_ms
        self._fetch_pending = (offset, now_ms + timeout)

    def _on_fetch_response(self, resp: FetchResponse, now_ms: int) -> None:
        if resp.error:
            if resp.epoch > self.epoch or (resp.epoch == self.epoch and resp.leader_id >= 0):
                self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            if self._fetch_pending and self._fetch_pending[0] == resp.fetch_offset:
                self._fetch_pending = None
                self._fetch_due = now_ms + self.config.request_timeout_ms // 4
            return
        if resp.epoch > self.epoch or (resp.epoch == self.epoch and self.role in (
                Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)):
            self._observe_epoch(resp.epoch, resp.src, now_ms)  # only a leader answers
        if (self.role is not Role.FOLLOWER or resp.epoch != self.epoch
                or resp.src != self.leader_id or self._fetch_pending is None
                or self._fetch_pending[0] != resp.fetch_offset
                or resp.fetch_offset != self.log.end_offset):
            return  # stale, duplicated or from someone else
        self._fetch_pending = None
        self._last_fetch_ok = now_ms
        self._deadline = now_ms + self.config.fetch_timeout_ms
        self._fetch_due = now_ms
        if resp.diverging is not None:
            self._truncate(*resp.diverging)
        elif resp.snapshot_id is not None:
            self.outbox.append(FetchSnapshotRequest(self.node_id, self.leader_id, self.epoch,
                                                    resp.snapshot_id))
            self._fetch_pending = (resp.fetch_offset, now_ms + self.config.request_timeout_ms)
        else:
            if resp.entries:
                self._append(list(resp.entries))
            hw = min(resp.high_watermark, self.log.end_offset)
            if hw > self.high_watermark:
                self.high_watermark = hw
            if resp.high_watermark >= 0:
                self._learned_hw(resp.high_watermark)
            self._maybe_send_update(now_ms)

    def _learned_hw(self, hw: int) -> None:
        if not self.hw_from_leader:
            self.hw_from_leader = True
            self.first_leader_hw = hw

    def _truncate(self, epoch: int, end_offset: int) -> None:
        _, own_end = self.log.end_offset_for_epoch(epoch)
        target = min(end_offset, own_end, self.log.end_offset)
        if target < self.high_watermark:
            raise RaftFatalError(
                f"node {self.node_id}: leader asks to truncate to {target}, below the high "
                f"watermark {self.high_watermark}")
        self.log.truncate_to(target)
        self.history.truncate(target)
        self.recovered_end = min(self.recovered_end, target)

    def _on_fetch_snapshot_response(self, resp: FetchSnapshotResponse, now_ms: int) -> None:
        if resp.error or resp.snapshot is None:
            if resp.epoch > self.epoch:
                self._observe_epoch(resp.epoch, resp.leader_id, now_ms)
            self._fetch_pending = None
            return
        if (self.role is not Role.FOLLOWER or resp.epoch != self.epoch
                or resp.src != self.leader_id or self._fetch_pending is None):
            return
        snap = resp.snapshot
        if snap.end_offset >= self.high_watermark and snap.end_offset > self.log.start_offset:
            self.log.install_snapshot(snap)
            self.history.reset(unframe_snapshot(snap.payload)[0], snap.end_offset)
            self.history.truncate(snap.end_offset)
            self.high_watermark = snap.end_offset
        self._fetch_pending = None
        self._fetch_due = now_ms

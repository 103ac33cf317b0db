"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
and the timers behind them, after Kafka's classic group coordinator.

A rebalance: a join (or a leave, an expiry, a changed subscription) moves the
group to PreparingRebalance; every known member must send JoinGroup again
within the rebalance timeout (waiting JoinGroups are parked). When all have
joined — or the timeout passes and the stragglers are removed — the
generation is bumped, a protocol is selected, every parked JoinGroup is
answered (the leader with the members' metadata) and the group waits in
CompletingRebalance for the leader's SyncGroup with the assignment. That is
written as a GroupMetadata record; then every parked SyncGroup is answered and
the group is Stable. A group that leaves Empty waits
``group.initial.rebalance.delay.ms`` first, extended while members keep
arriving, up to the rebalance timeout.

KIP-394: JoinGroup v4+ with no member id gets MEMBER_ID_REQUIRED and an id to
join with. KIP-345: a static member (``group.instance.id``) that rejoins with
no member id takes over its old identity and assignment; in a Stable group
with unchanged protocols this causes no rebalance, and the old member id is
fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.core import CoordinatorBase, Effects
from odradek.coordinator.group import Group, GroupState, Member, Token
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.heartbeat_response import HeartbeatResponse
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from odradek.wire.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from odradek.wire.messages.sync_group_request import SyncGroupRequest
from odradek.wire.messages.sync_group_response import SyncGroupResponse

S = GroupState


def join_error(code: int, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name=None, leader="", member_id=member_id
    )


def sync_error(code: int) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, assignment=b"")


@dataclass(frozen=True, slots=True)
class Leaving:
    member_id: str
    group_instance_id: str | None


class Membership(CoordinatorBase):
    # -- JoinGroup ----------------------------------------------------------------------

    def join(
        self, token: Token, now_ms: int, version: int, req: JoinGroupRequest,
        client_id: str, client_host: str,
    ) -> Effects:
        fx = Effects()
        code = self.coordinator_error(req.group_id)
        if code:
            return fx.reply(token, join_error(code, req.member_id))
        if not req.group_id:
            return fx.reply(token, join_error(ErrorCode.INVALID_GROUP_ID, req.member_id))
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return fx.reply(token, join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fx.reply(token, join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = self.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now_ms)
        if group.state is S.DEAD:
            return fx.reply(token, join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
        names = [p.name for p in req.protocols]
        if not group.supports(req.protocol_type, names):
            return fx.reply(token, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        rebalance_ms = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else (
            req.session_timeout_ms)  # v0 has no rebalance timeout: Kafka uses the session's
        member = Member(
            member_id=req.member_id, group_instance_id=req.group_instance_id,
            client_id=client_id, client_host=client_host,
            session_timeout_ms=req.session_timeout_ms, rebalance_timeout_ms=rebalance_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            join_token=token, join_version=version,
        )
        if not req.member_id:
            return self._join_unknown(fx, group, member, now_ms, version)
        return self._join_known(fx, group, member, now_ms)

    def _join_unknown(
        self, fx: Effects, group: Group, member: Member, now_ms: int, version: int
    ) -> Effects:
        token = member.join_token
        iid = member.group_instance_id
        if iid is not None and iid in group.static_members:
            member.member_id = self.new_member_id(iid)
            return self._replace_static(fx, group, member, now_ms)
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return fx.reply(token, join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        member.member_id = self.new_member_id(iid if iid is not None else member.client_id)
        if iid is None and version >= 4:
            group.pending_members[member.member_id] = now_ms + member.session_timeout_ms
            return fx.reply(token, join_error(ErrorCode.MEMBER_ID_REQUIRED, member.member_id))
        return self._add_and_rebalance(fx, group, member, now_ms)

    def _join_known(self, fx: Effects, group: Group, member: Member, now_ms: int) -> Effects:
        token, mid = member.join_token, member.member_id
        if mid in group.pending_members:
            del group.pending_members[mid]
            return self._add_and_rebalance(fx, group, member, now_ms)
        if group.is_fenced(mid, member.group_instance_id):
            return fx.reply(token, join_error(ErrorCode.FENCED_INSTANCE_ID, mid))
        current = group.members.get(mid)
        if current is None or group.state is S.EMPTY:
            return fx.reply(token, join_error(ErrorCode.UNKNOWN_MEMBER_ID, mid))
        if current.group_instance_id != member.group_instance_id:
            return fx.reply(token, join_error(ErrorCode.FENCED_INSTANCE_ID, mid))
        changed = current.protocols != member.protocols
        self._update(current, member, now_ms)
        if group.state is S.PREPARING_REBALANCE:
            return self.maybe_complete_join(fx, group, now_ms)
        if group.state is S.COMPLETING_REBALANCE and not changed:
            current.join_token = None  # it missed the answer: give it again
            return fx.reply(member.join_token, self._join_response(group, current))
        if group.state is S.STABLE and not changed and mid != group.leader_id:
            current.join_token = None
            return fx.reply(member.join_token, self._join_response(group, current))
        return self.prepare_rebalance(fx, group, now_ms)

    @staticmethod
    def _update(current: Member, joined: Member, now_ms: int) -> None:
        current.protocols = joined.protocols
        current.session_timeout_ms = joined.session_timeout_ms
        current.rebalance_timeout_ms = joined.rebalance_timeout_ms
        current.client_id, current.client_host = joined.client_id, joined.client_host
        current.join_token, current.join_version = joined.join_token, joined.join_version
        current.heartbeat_deadline_ms = now_ms + joined.session_timeout_ms

    def _add_and_rebalance(
        self, fx: Effects, group: Group, member: Member, now_ms: int
    ) -> Effects:
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        group.add(member)
        if group.initial_delay_until_ms is not None:
            group.joined_during_delay = True
        if group.state is S.PREPARING_REBALANCE:
            return self.maybe_complete_join(fx, group, now_ms)
        return self.prepare_rebalance(fx, group, now_ms)

    def _replace_static(self, fx: Effects, group: Group, joined: Member, now_ms: int) -> Effects:
        """KIP-345: a static member back with a new member id replaces its old self."""
        iid = joined.group_instance_id
        assert iid is not None
        token = joined.join_token
        old = group.members[group.static_members[iid]]
        if old.join_token is not None:
            fx.reply(old.join_token, join_error(ErrorCode.FENCED_INSTANCE_ID, old.member_id))
        if old.sync_token is not None:
            fx.reply(old.sync_token, sync_error(ErrorCode.FENCED_INSTANCE_ID))
        leader = joined.member_id if group.leader_id == old.member_id else group.leader_id
        protocol = group.protocol_name
        members = list(group.members.values())
        group.members, group.leader_id = {}, None
        del group.static_members[iid]
        joined.assignment, joined.is_new = old.assignment, False
        joined.heartbeat_deadline_ms = now_ms + joined.session_timeout_ms
        for m in members:  # keep the joining order, the new id in the old one's place
            group.add(joined if m is old else m)
        group.leader_id = leader
        if group.state is S.STABLE and group.select_protocol() == protocol:
            # Same generation, same assignment: persist the new member id, no rebalance.
            joined.join_token = None
            fx.records.append(self.group_record(group))
            return fx.reply(token, self._join_response(group, joined))
        if group.state is S.PREPARING_REBALANCE:
            return self.maybe_complete_join(fx, group, now_ms)
        return self.prepare_rebalance(fx, group, now_ms)

    def _join_response(self, group: Group, member: Member) -> JoinGroupResponse:
        members = []
        if member.member_id == group.leader_id:
            members = [
                JoinGroupResponseMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    metadata=m.metadata(group.protocol_name),
                )
                for m in group.members.values()
            ]
        return JoinGroupResponse(
            error_code=0, generation_id=group.generation, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "",
            member_id=member.member_id, members=members,
        )

    # -- rebalancing --------------------------------------------------------------------

    def prepare_rebalance(self, fx: Effects, group: Group, now_ms: int) -> Effects:
        """Start a rebalance: every member must join again."""
        if group.state is S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_token is not None:
                    fx.reply(m.sync_token, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_token = None
        group.sync_deadline_ms = None
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.config.initial_rebalance_delay_ms
        if group.state is S.EMPTY and delay > 0:
            group.initial_delay_until_ms = now_ms + min(delay, timeout)
            group.join_deadline_ms = group.initial_delay_until_ms
            group.rebalance_limit_ms = now_ms + timeout
            group.joined_during_delay = False
        else:
            group.initial_delay_until_ms = None
            group.join_deadline_ms = now_ms + timeout
        self.transition(group, S.PREPARING_REBALANCE, now_ms)
        return self.maybe_complete_join(fx, group, now_ms)

    def maybe_complete_join(self, fx: Effects, group: Group, now_ms: int) -> Effects:
        if (
            group.state is S.PREPARING_REBALANCE
            and group.initial_delay_until_ms is None
            and group.all_joined()
        ):
            return self.complete_join(fx, group, now_ms)
        return fx

    def complete_join(self, fx: Effects, group: Group, now_ms: int) -> Effects:
        """End the join phase with whoever has joined; answer their JoinGroups."""
        for m in [m for m in group.members.values() if m.join_token is None]:
            group.remove(m.member_id)
        group.join_deadline_ms = group.initial_delay_until_ms = None
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            self.transition(group, S.EMPTY, now_ms)
            fx.records.append(self.group_record(group))
            return fx
        group.protocol_name = group.select_protocol()
        self.transition(group, S.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline_ms = now_ms + max(
            m.rebalance_timeout_ms for m in group.members.values()
        )
        for m in group.members.values():
            assert m.join_token is not None
            fx.reply(m.join_token, self._join_response(group, m))
            m.join_token, m.is_new = None, False
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        return fx

    def remove_member(self, fx: Effects, group: Group, member_id: str, now_ms: int) -> None:
        """A member leaves or expires; the others rebalance."""
        member = group.remove(member_id)
        if member is None:
            return
        if member.join_token is not None:
            fx.reply(member.join_token, join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        if member.sync_token is not None:
            fx.reply(member.sync_token, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(fx, group, now_ms)
        elif group.state is S.PREPARING_REBALANCE:
            self.maybe_complete_join(fx, group, now_ms)

    # -- SyncGroup ----------------------------------------------------------------------

    def sync(self, token: Token, now_ms: int, req: SyncGroupRequest) -> Effects:
        fx = Effects()
        code = self.coordinator_error(req.group_id)
        if code:
            return fx.reply(token, sync_error(code))
        group = self.groups.get(req.group_id)
        if group is None:
            return fx.reply(token, sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        code = self._check_member(group, req.member_id, req.group_instance_id, req.generation_id)
        if code:
            return fx.reply(token, sync_error(code))
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return fx.reply(token, sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[req.member_id]
        if group.state is S.PREPARING_REBALANCE:
            return fx.reply(token, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.state is S.STABLE:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return fx.reply(token, self._sync_response(group, member))
        member.sync_token = token
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if req.member_id == group.leader_id:
            given = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            self.transition(group, S.STABLE, now_ms)
            group.sync_deadline_ms = None
            fx.records.append(self.group_record(group))
            for m in group.members.values():
                if m.sync_token is not None:
                    fx.reply(m.sync_token, self._sync_response(group, m))
                    m.sync_token = None
        return fx

    @staticmethod
    def _sync_response(group: Group, member: Member) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=0, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, assignment=member.assignment,
        )

    def _check_member(
        self, group: Group, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members or group.state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- Heartbeat ----------------------------------------------------------------------

    def heartbeat(
        self, token: Token, now_ms: int, group_id: str, member_id: str,
        instance_id: str | None, generation: int,
    ) -> Effects:
        fx = Effects()
        code = self.coordinator_error(group_id)
        group = self.groups.get(group_id)
        if not code:
            code = (
                ErrorCode.UNKNOWN_MEMBER_ID if group is None
                else self._check_member(group, member_id, instance_id, generation)
            )
        if not code and group is not None:
            member = group.members[member_id]
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            if group.state is S.PREPARING_REBALANCE:
                code = ErrorCode.REBALANCE_IN_PROGRESS
        return fx.reply(token, HeartbeatResponse(error_code=code))

    # -- LeaveGroup ---------------------------------------------------------------------

    def leave(
        self, token: Token, now_ms: int, group_id: str, leaving: list[Leaving]
    ) -> Effects:
        fx = Effects()
        code, group = self.live_group(group_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if group is None:
            return fx.reply(token, LeaveGroupResponse(error_code=code))
        answers = []
        for who in leaving:
            error = self._leave_one(fx, group, who, now_ms)
            answers.append(MemberResponse(
                member_id=who.member_id, group_instance_id=who.group_instance_id,
                error_code=error,
            ))
        return fx.reply(token, LeaveGroupResponse(error_code=0, members=answers))

    def _leave_one(self, fx: Effects, group: Group, who: Leaving, now_ms: int) -> ErrorCode:
        mid = who.member_id
        if who.group_instance_id is not None:
            current = group.static_members.get(who.group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if mid and mid != current:
                return ErrorCode.FENCED_INSTANCE_ID
            mid = current
        elif mid in group.pending_members:
            del group.pending_members[mid]
            self.maybe_complete_join(fx, group, now_ms)
            return ErrorCode.NONE
        if mid not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.remove_member(fx, group, mid, now_ms)
        return ErrorCode.NONE

    # -- timers -------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Effects:
        """Expire sessions, pending member ids and rebalance deadlines due by ``now_ms``."""
        fx = Effects()
        for group in list(self.groups.values()):
            for mid, expiry in list(group.pending_members.items()):
                if expiry <= now_ms:
                    del group.pending_members[mid]
                    self.maybe_complete_join(fx, group, now_ms)
            for m in list(group.members.values()):
                idle = m.join_token is None and m.sync_token is None
                if idle and m.heartbeat_deadline_ms <= now_ms and m.member_id in group.members:
                    self.remove_member(fx, group, m.member_id, now_ms)
            if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
                self._join_deadline(fx, group, now_ms)
            if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
                group.sync_deadline_ms = None
                for m in [m for m in group.members.values() if m.sync_token is None]:
                    self.remove_member(fx, group, m.member_id, now_ms)
        return fx

    def _join_deadline(self, fx: Effects, group: Group, now_ms: int) -> None:
        delay = self.config.initial_rebalance_delay_ms
        if (
            group.initial_delay_until_ms is not None
            and group.joined_during_delay
            and now_ms < group.rebalance_limit_ms
        ):
            group.joined_during_delay = False
            until = min(now_ms + delay, group.rebalance_limit_ms)
            group.initial_delay_until_ms = group.join_deadline_ms = until
            return
        group.initial_delay_until_ms = None
        self.complete_join(fx, group, now_ms)

"""The classic group protocol's requests: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup, after Kafka's classic group coordinator.

:class:`ClassicMembership` is a part of
:class:`~odradek.coordinator.coordinator.GroupCoordinator`. It validates each
request against the shared :class:`~odradek.coordinator.store.GroupStore` and
drives the generation lifecycle of :mod:`.rebalance` (which also holds the
timers: :meth:`ClassicMembership.poll`). It owns the soft state of membership
(members, parked requests, heartbeat deadlines); it never changes committed
offsets. It also tells the offsets part whether a member may commit
(:meth:`ClassicMembership.validate_commit`).

Records: the leader's SyncGroup completes a generation and writes it as a
GroupMetadata record; a generation that completes with no member writes the
Empty group (:mod:`.rebalance`).

KIP-394: JoinGroup v4+ with no member id gets MEMBER_ID_REQUIRED and an id to
join with. KIP-345: a static member (``group.instance.id``) that rejoins with
no member id takes over its old identity and assignment; in a Stable group
with unchanged protocols this causes no rebalance (the new member id is
written as a GroupMetadata record), and the old member id is fenced
(FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.classic.rebalance import (
    Rebalancer,
    group_record,
    join_error,
    join_response,
    sync_error,
    sync_response,
    transition,
)
from odradek.coordinator.core import Effects
from odradek.coordinator.group import Group, GroupState, Member, Token
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.heartbeat_response import HeartbeatResponse
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from odradek.wire.messages.sync_group_request import SyncGroupRequest

__all__ = ["ClassicMembership", "Leaving", "join_error", "sync_error"]

S = GroupState


@dataclass(frozen=True, slots=True)
class Leaving:
    member_id: str
    group_instance_id: str | None


class ClassicMembership:
    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self.rebalance = Rebalancer(store.config, store.rebalances)

    # -- JoinGroup ----------------------------------------------------------------------

    def join(
        self, token: Token, now_ms: int, version: int, req: JoinGroupRequest,
        client_id: str, client_host: str,
    ) -> Effects:
        fx = Effects()
        code = self.store.coordinator_error(req.group_id)
        if code:
            return fx.reply(token, join_error(code, req.member_id))
        if not req.group_id:
            return fx.reply(token, join_error(ErrorCode.INVALID_GROUP_ID, req.member_id))
        cfg = self.store.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return fx.reply(token, join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
        groups = self.store.groups
        group = groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fx.reply(token, join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now_ms)
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
            member.member_id = self.store.new_member_id(iid)
            return self._replace_static(fx, group, member, now_ms)
        if len(group.members) + len(group.pending_members) >= self.store.config.max_size:
            return fx.reply(token, join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        member.member_id = self.store.new_member_id(
            iid if iid is not None else member.client_id
        )
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
            return self.rebalance.maybe_complete_join(fx, group, now_ms)
        if group.state is S.COMPLETING_REBALANCE and not changed:
            current.join_token = None  # it missed the answer: give it again
            return fx.reply(member.join_token, join_response(group, current))
        if group.state is S.STABLE and not changed and mid != group.leader_id:
            current.join_token = None
            return fx.reply(member.join_token, join_response(group, current))
        return self.rebalance.prepare(fx, group, now_ms)

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
            return self.rebalance.maybe_complete_join(fx, group, now_ms)
        return self.rebalance.prepare(fx, group, now_ms)

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
            fx.records.append(group_record(group))
            return fx.reply(token, join_response(group, joined))
        if group.state is S.PREPARING_REBALANCE:
            return self.rebalance.maybe_complete_join(fx, group, now_ms)
        return self.rebalance.prepare(fx, group, now_ms)

    # -- SyncGroup ----------------------------------------------------------------------

    def sync(self, token: Token, now_ms: int, req: SyncGroupRequest) -> Effects:
        fx = Effects()
        code = self.store.coordinator_error(req.group_id)
        if code:
            return fx.reply(token, sync_error(code))
        group = self.store.groups.get(req.group_id)
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
            return fx.reply(token, sync_response(group, member))
        member.sync_token = token
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if req.member_id == group.leader_id:
            given = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            transition(group, S.STABLE, now_ms)
            group.sync_deadline_ms = None
            fx.records.append(group_record(group))
            for m in group.members.values():
                if m.sync_token is not None:
                    fx.reply(m.sync_token, sync_response(group, m))
                    m.sync_token = None
        return fx

    @staticmethod
    def _check_member(
        group: Group, member_id: str, instance_id: str | None, generation: int
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
        code = self.store.coordinator_error(group_id)
        group = self.store.groups.get(group_id)
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
        code, group = self.store.live_group(group_id, ErrorCode.UNKNOWN_MEMBER_ID)
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
            self.rebalance.maybe_complete_join(fx, group, now_ms)
            return ErrorCode.NONE
        if mid not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalance.remove_member(fx, group, mid, now_ms)
        return ErrorCode.NONE

    # -- OffsetCommit, as the offsets part asks -------------------------------------------

    def validate_commit(
        self, group: Group, member_id: str, instance_id: str | None, generation: int,
        now_ms: int,
    ) -> ErrorCode:
        """May this member of an existing group commit? A commit counts as a heartbeat."""
        code = self._check_member(group, member_id, instance_id, generation)
        if code:
            return code
        if group.state is S.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.NONE

    # -- timers -------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Effects:
        """Expire sessions, pending member ids and rebalance deadlines due by ``now_ms``
        (not in groups whose partition is still loading: their sessions start
        when it is loaded)."""
        fx = Effects()
        for group in list(self.store.groups.values()):
            if not self.store.is_loading(group.group_id):
                self.rebalance.expire(fx, group, now_ms)
        return fx

    def next_deadline_ms(self) -> int | None:
        """The earliest time :meth:`poll` has work to do; None when there is none."""
        due = [self.rebalance.next_deadline(g) for g in self.store.groups.values()
               if not self.store.is_loading(g.group_id)]
        return min((t for t in due if t is not None), default=None)

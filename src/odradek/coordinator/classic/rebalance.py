"""The lifecycle of a classic group's generation and the timers behind it, after
Kafka's classic group coordinator. :mod:`.membership` turns requests into calls
of :class:`Rebalancer`; nothing here reads a request or the store.

A rebalance: a join (or a leave, an expiry, a changed subscription) moves the
group to PreparingRebalance; every known member must send JoinGroup again
within the rebalance timeout (waiting JoinGroups are parked in
``Member.join_token``). When all have joined — or the timeout passes and the
stragglers are removed — the generation is bumped, a protocol is selected,
every parked JoinGroup is answered (the leader with the members' metadata) and
the group waits in CompletingRebalance for the leader's SyncGroup (parked in
``Member.sync_token``). A group that leaves Empty waits
``group.initial.rebalance.delay.ms`` first, extended while members keep
arriving, up to the rebalance timeout.

Timers (:meth:`Rebalancer.expire`, :meth:`Rebalancer.next_deadline`): the
session of a member with no parked request, the expiry of a member id handed
out with MEMBER_ID_REQUIRED, the join deadline (rebalance timeout or initial
delay) and the sync deadline. Each works on one group at a time.

Records: a GroupMetadata record (:func:`group_record`) is written when a
generation completes with no member left (Empty); the leader's SyncGroup and
KIP-345's static replacement write theirs in :mod:`.membership`.
"""

from __future__ import annotations

from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.group import Group, GroupState, Member
from odradek.coordinator.records import GroupRecord
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from odradek.wire.messages.sync_group_response import SyncGroupResponse

S = GroupState


def join_error(code: int, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name=None, leader="", member_id=member_id
    )


def sync_error(code: int) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, assignment=b"")


def transition(group: Group, state: GroupState, now_ms: int) -> None:
    group.state = state
    group.state_timestamp_ms = now_ms


def group_record(group: Group) -> GroupRecord:
    return GroupRecord(group.group_id, group.snapshot())


def join_response(group: Group, member: Member) -> JoinGroupResponse:
    """The JoinGroup answer of the current generation (the member list for the leader)."""
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


def sync_response(group: Group, member: Member) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=0, protocol_type=group.protocol_type,
        protocol_name=group.protocol_name, assignment=member.assignment,
    )


class Rebalancer:
    def __init__(self, config: GroupConfig, counts: dict[str, int] | None = None) -> None:
        """``counts``: where the rebalances begun are counted, under ``classic``
        (the store's :attr:`~odradek.coordinator.store.GroupStore.rebalances`)."""
        self.config = config
        self.counts = counts if counts is not None else {}

    # -- rebalancing --------------------------------------------------------------------

    def prepare(self, fx: Effects, group: Group, now_ms: int) -> Effects:
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
        if group.state is not S.PREPARING_REBALANCE:
            self.counts["classic"] = self.counts.get("classic", 0) + 1
        transition(group, S.PREPARING_REBALANCE, now_ms)
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
            transition(group, S.EMPTY, now_ms)
            fx.records.append(group_record(group))
            return fx
        group.protocol_name = group.select_protocol()
        transition(group, S.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline_ms = now_ms + max(
            m.rebalance_timeout_ms for m in group.members.values()
        )
        for m in group.members.values():
            assert m.join_token is not None
            fx.reply(m.join_token, join_response(group, m))
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
            self.prepare(fx, group, now_ms)
        elif group.state is S.PREPARING_REBALANCE:
            self.maybe_complete_join(fx, group, now_ms)

    # -- timers -------------------------------------------------------------------------

    def expire(self, fx: Effects, group: Group, now_ms: int) -> None:
        """Expire the sessions, pending member ids and deadlines of ``group`` due by
        ``now_ms``."""
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

    @staticmethod
    def next_deadline(group: Group) -> int | None:
        """The earliest time :meth:`expire` has work to do in ``group``; None if never."""
        times = [group.join_deadline_ms, group.sync_deadline_ms]
        times += group.pending_members.values()
        times += [
            m.heartbeat_deadline_ms for m in group.members.values()
            if m.join_token is None and m.sync_token is None
        ]
        return min((t for t in times if t is not None), default=None)

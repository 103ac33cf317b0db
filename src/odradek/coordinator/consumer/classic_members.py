"""Classic members inside a KIP-848 consumer group: the online upgrade of Kafka 4.0.

When a member of the consumer protocol joins a classic group that has
members (Stable, protocol type ``consumer``), the group becomes a consumer
group at once (:meth:`ClassicBridge.upgrade`): each classic member becomes a
consumer-group member that keeps its assignment and takes the generation as
its member epoch, and the newcomer joins as usual. The classic members keep
speaking JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the coordinator
answers them from the consumer group, as Kafka 4.0 does:

* **Heartbeat**: ILLEGAL_GENERATION unless the generation is the member's
  epoch; REBALANCE_IN_PROGRESS while the member is behind the target
  assignment (it must rejoin to reconcile); NONE otherwise.
* **JoinGroup**: the member's subscription (and, from a cooperative client,
  the partitions it still owns) comes from its protocol metadata; the member is
  reconciled like a consumer-protocol member and answered at once, with its
  member epoch as the generation, its own first protocol, and no leader work
  (the coordinator assigns). A new classic member may join too (v4+: after
  MEMBER_ID_REQUIRED).
* **SyncGroup**: the member's current assignment, in the classic
  ConsumerProtocolAssignment format (partitions still held by another member
  come at a later rejoin).
* **LeaveGroup** removes the member; its session is its classic session timeout.

An eager client revokes everything before it rejoins (it reports no owned
partitions), a cooperative one only what it was told to give up; either way a
partition is handed to one member only once its previous owner released it.
When the last consumer-protocol member leaves, the group is downgraded back to
a classic group (:mod:`odradek.coordinator.downgrade`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from odradek.coordinator.consumer import records as cr
from odradek.coordinator.consumer.model import (
    Assignment,
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    normalized,
)
from odradek.coordinator.core import Effects
from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
)
from odradek.wire.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopic,
)
from odradek.wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from odradek.wire.messages.heartbeat_response import HeartbeatResponse
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.join_group_response import JoinGroupResponse
from odradek.wire.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from odradek.wire.messages.sync_group_request import SyncGroupRequest
from odradek.wire.messages.sync_group_response import SyncGroupResponse
from odradek.wire.primitives import DecodeError

Topics = dict[str, tuple[uuid.UUID, int]]


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: list[str]
    owned: dict[str, list[int]]
    version: int


def decode_subscription(data: bytes) -> Subscription | None:
    """A classic consumer's protocol metadata; None when it does not decode."""
    if len(data) < 2:
        return None
    version = int.from_bytes(data[:2], "big", signed=True)
    try:
        sub = ConsumerProtocolSubscription.decode(memoryview(data)[2:], max(0, min(version, 3)))
    except (DecodeError, ValueError):
        return None
    return Subscription(list(sub.topics), {tp.topic: list(tp.partitions)
                                           for tp in sub.owned_partitions}, max(0, version))


def decode_assignment(data: bytes, topics: Topics) -> Assignment:
    if len(data) < 2:
        return {}
    version = int.from_bytes(data[:2], "big", signed=True)
    try:
        a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], max(0, min(version, 3)))
    except (DecodeError, ValueError):
        return {}
    return normalized((topics[tp.topic][0], tp.partitions)
                      for tp in a.assigned_partitions if tp.topic in topics)


def encode_assignment(assignment: Assignment, name_of: Callable[[uuid.UUID], str | None],
                      version: int) -> bytes:
    version = max(0, min(version, 3))
    body = ConsumerProtocolAssignment(assigned_partitions=[
        AssignedTopic(topic=name, partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
        if (name := name_of(t)) is not None])
    return version.to_bytes(2, "big", signed=True) + body.encode(version)


class _Membership(Protocol):
    """What the bridge needs of :class:`~.membership.ConsumerMembership`."""

    store: GroupStore

    def refresh_and_assign(self, fx: Effects, group: Group, topics: Topics,
                           bump: bool) -> None: ...

    def reconcile_member(self, fx: Effects, group: Group, member: ConsumerMember,
                         owned: Assignment | None, now_ms: int, joined: bool) -> None: ...

    def member_record(self, group_id: str, m: ConsumerMember) -> cr.ConsumerRecord: ...

    def current_record(self, group_id: str, m: ConsumerMember) -> cr.ConsumerRecord: ...

    def remove_member(self, fx: Effects, group: Group, member_id: str, now_ms: int,
                      topics: Topics | None) -> None: ...


class ClassicBridge:
    def __init__(self, membership: _Membership) -> None:
        self.m = membership
        self.store = membership.store

    # -- the upgrade ----------------------------------------------------------------------

    def can_upgrade(self, group: Group) -> bool:
        return (group.consumer is None and group.state is GroupState.STABLE
                and group.protocol_type == "consumer" and not group.pending_members)

    def upgrade(self, fx: Effects, group: Group, topics: Topics, now_ms: int) -> None:
        """A Stable classic consumer group becomes a consumer group, its members
        keeping their assignments at the generation as member epoch."""
        cg = ConsumerGroup(group_epoch=group.generation, assignment_epoch=group.generation)
        for old in group.members.values():
            data = old.metadata(group.protocol_name)
            sub = decode_subscription(data)
            assigned = decode_assignment(old.assignment, topics)
            member = ConsumerMember(
                old.member_id, instance_id=old.group_instance_id, client_id=old.client_id,
                client_host=old.client_host,
                subscribed_topic_names=sorted(set(sub.topics)) if sub else [],
                rebalance_timeout_ms=old.rebalance_timeout_ms,
                member_epoch=group.generation, previous_member_epoch=group.generation,
                state=MemberState.STABLE, assigned=assigned,
                session_deadline_ms=old.heartbeat_deadline_ms,
                classic=ClassicInfo(list(old.protocols), old.session_timeout_ms))
            cg.add(member)
            cg.target[member.member_id] = assigned
            fx.records.append(self.m.member_record(group.group_id, member))
            fx.records.append(cr.target_member_record(group.group_id, member.member_id,
                                                      assigned))
            fx.records.append(self.m.current_record(group.group_id, member))
        fx.records.append(cr.epoch_record(group.group_id, cg.group_epoch))
        fx.records.append(cr.target_epoch_record(group.group_id, cg.assignment_epoch))
        group.members.clear()
        group.static_members.clear()
        group.leader_id = None
        group.join_deadline_ms = group.sync_deadline_ms = None
        group.initial_delay_until_ms = None
        group.state = GroupState.EMPTY
        group.consumer = cg
        group.protocol_name = None
        self.m.refresh_and_assign(fx, group, topics, bump=False)

    # -- JoinGroup ------------------------------------------------------------------------

    def join(
        self, token: Token, now_ms: int, version: int, req: JoinGroupRequest,
        client_id: str, client_host: str, topics: Topics,
    ) -> Effects:
        fx = Effects()
        group = self.store.groups[req.group_id]
        cg = group.consumer
        assert cg is not None

        def error(code: ErrorCode, member_id: str = "") -> Effects:
            return fx.reply(token, JoinGroupResponse(
                error_code=code, generation_id=-1, protocol_name=None, leader="",
                member_id=member_id))

        if req.protocol_type != "consumer" or not req.protocols:
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        cfg = self.store.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        member_id = req.member_id
        if req.group_instance_id is not None:
            holder = cg.static_members.get(req.group_instance_id)
            if holder is not None and member_id and holder != member_id:
                return error(ErrorCode.FENCED_INSTANCE_ID, member_id)
            if holder is not None and not member_id:
                member_id = holder
        if not member_id:
            member_id = self.store.new_member_id(req.group_instance_id or client_id)
            if version >= 4 and req.group_instance_id is None:
                group.pending_members[member_id] = now_ms + req.session_timeout_ms
                return error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        elif member_id not in cg.members and group.pending_members.pop(member_id, None) is None:
            # Not a member (e.g. removed when its session expired) nor an id just
            # handed out: as in a classic group, it must lose its partitions and
            # join anew, not come back claiming them.
            return error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        member = cg.members.get(member_id)
        joined = member is None
        if member is None:
            if len(cg.members) >= cfg.consumer_max_size:
                return error(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = ConsumerMember(member_id, instance_id=req.group_instance_id)
            cg.add(member)
        elif member.classic is None:
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        sub = decode_subscription(protocols[0][1])
        if sub is None:
            if joined:
                cg.remove(member_id)
            return error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        before, classic_before = member.metadata_key(), member.classic
        old_topics = list(member.subscribed_topic_names)
        member.client_id, member.client_host = client_id, client_host
        member.subscribed_topic_names = sorted(set(sub.topics))
        member.rebalance_timeout_ms = (req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0
                                       else req.session_timeout_ms)
        member.classic = ClassicInfo(protocols, req.session_timeout_ms)
        member.session_deadline_ms = now_ms + req.session_timeout_ms
        if joined or member.metadata_key() != before or member.classic != classic_before:
            fx.records.append(self.m.member_record(group.group_id, member))
        self.m.refresh_and_assign(
            fx, group, topics, bump=joined or old_topics != member.subscribed_topic_names)
        owned = normalized((topics[t][0], ps) for t, ps in sub.owned.items() if t in topics)
        self.m.reconcile_member(fx, group, member, owned, now_ms, joined)
        return fx.reply(token, JoinGroupResponse(
            error_code=0, generation_id=member.member_epoch, protocol_type="consumer",
            protocol_name=protocols[0][0], leader="", skip_assignment=False,
            member_id=member_id, members=[]))

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------

    def _member(self, group_id: str, member_id: str, generation: int
                ) -> tuple[ErrorCode, ConsumerMember | None]:
        group = self.store.groups[group_id]
        cg = group.consumer
        assert cg is not None
        member = cg.members.get(member_id)
        if member is None or member.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, member
        return ErrorCode.NONE, member

    def sync(self, token: Token, now_ms: int, req: SyncGroupRequest,
             name_of: Callable[[uuid.UUID], str | None]) -> Effects:
        fx = Effects()
        code, member = self._member(req.group_id, req.member_id, req.generation_id)
        if code or member is None or member.classic is None:
            return fx.reply(token, SyncGroupResponse(error_code=code, assignment=b""))
        member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        name = member.classic.protocols[0][0]
        sub = decode_subscription(member.classic.protocols[0][1])
        data = encode_assignment(member.assigned, name_of, sub.version if sub else 0)
        return fx.reply(token, SyncGroupResponse(
            error_code=0, protocol_type="consumer", protocol_name=name, assignment=data))

    def heartbeat(self, token: Token, now_ms: int, group_id: str, member_id: str,
                  generation: int, topics: Topics) -> Effects:
        fx = Effects()
        code, member = self._member(group_id, member_id, generation)
        if member is not None and member.classic is not None and code != (
                ErrorCode.UNKNOWN_MEMBER_ID):
            member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
        if code or member is None:
            return fx.reply(token, HeartbeatResponse(error_code=code))
        group = self.store.groups[group_id]
        cg = group.consumer
        assert cg is not None
        if cg.group_epoch > cg.assignment_epoch:
            self.m.refresh_and_assign(fx, group, topics, bump=False)
        behind = (member.member_epoch != cg.assignment_epoch
                  or member.state is not MemberState.STABLE
                  or member.assigned != cg.target.get(member_id, {}))
        return fx.reply(token, HeartbeatResponse(
            error_code=ErrorCode.REBALANCE_IN_PROGRESS if behind else 0))

    def leave(self, token: Token, now_ms: int, group_id: str,
              leaving: list[tuple[str, str | None]]) -> Effects:
        fx = Effects()
        group = self.store.groups[group_id]
        cg = group.consumer
        assert cg is not None
        answers = []
        for member_id, instance_id in leaving:
            mid = member_id
            if instance_id is not None:
                holder = cg.static_members.get(instance_id)
                code = (ErrorCode.UNKNOWN_MEMBER_ID if holder is None else
                        ErrorCode.FENCED_INSTANCE_ID if mid and mid != holder else ErrorCode.NONE)
                mid = holder or mid
            else:
                code = ErrorCode.NONE if mid in cg.members else ErrorCode.UNKNOWN_MEMBER_ID
            if not code:
                self.m.remove_member(fx, group, mid, now_ms, None)
            answers.append(MemberResponse(member_id=member_id, group_instance_id=instance_id,
                                          error_code=code))
        return fx.reply(token, LeaveGroupResponse(error_code=0, members=answers))

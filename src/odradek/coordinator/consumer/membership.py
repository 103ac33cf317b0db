"""KIP-848's consumer group protocol: ConsumerGroupHeartbeat, its timers, and
its word on offset commits and fetches.

:class:`ConsumerMembership` is a part of
:class:`~odradek.coordinator.coordinator.GroupCoordinator`, next to the classic
protocol's part. A consumer group is a :class:`~odradek.coordinator.group.Group`
whose ``consumer`` is set (:class:`~.model.ConsumerGroup`); its committed
offsets are the group's as for a classic group.

One heartbeat, after Kafka's GroupMetadataManager:

1. validate the request (nothing changes if it is refused);
2. join (member epoch 0: a new member, a member coming back, or a static
   member taking over from its previous incarnation that left with epoch -2),
   leave (-1; -2 for a static member that will be back), or check the epoch of
   a known member (a member one epoch behind that owns no more than it is
   assigned is taken as having lost the answer; otherwise FENCED_MEMBER_EPOCH);
3. record a changed subscription; resolve every member's topic names and
   regular expression (RE2, full match, internal topics left out) against the
   metadata; if members, subscriptions or the subscribed topics' partition
   counts changed, bump the group epoch;
4. if the group epoch is ahead of the target assignment, compute a new target
   with the group's assignor (:mod:`.assignors`);
5. reconcile the member toward its target (:mod:`.reconcile`), and answer with
   its epoch and, when it changed or the request was a full one, its assignment.

Records are written for each change in Kafka's formats (:mod:`.records`); the
live group is what replaying them gives (:mod:`.replay`). Members that miss
their session (``group.consumer.session.timeout.ms``) or do not revoke within
their rebalance timeout are removed by :meth:`ConsumerMembership.poll`.

Conversion: a heartbeat for an empty classic group turns it into a consumer
group (its offsets stay); a JoinGroup for an empty consumer group turns it back
(:meth:`ConsumerMembership.to_classic`). A Stable classic group with members is
upgraded online, its members staying on the classic protocol inside the
consumer group (:mod:`.classic_members`); one in the middle of a rebalance
answers GROUP_ID_NOT_FOUND (the member retries).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from odradek.coordinator.consumer import records as cr
from odradek.coordinator.consumer.assignors import ASSIGNORS
from odradek.coordinator.consumer.classic_members import ClassicBridge
from odradek.coordinator.consumer.model import (
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    normalized,
)
from odradek.coordinator.consumer.reconcile import reconcile
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from odradek.wire.messages.consumer_group_heartbeat_response import (
    Assignment as WireAssignment,
)
from odradek.wire.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from odradek.wire.messages.consumer_group_heartbeat_response import (
    TopicPartitions as WireTopicPartitions,
)

Topics = Mapping[str, tuple[uuid.UUID, int]]
"""The cluster's topics: name -> (topic id, partition count)."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """An RE2 pattern (Kafka uses RE2/J); raises ``re2.error`` if invalid."""
    return re2.compile(pattern, options=_RE2_OPTIONS)


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Caller:
    client_id: str
    client_host: str
    version: int


def _owned(req: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if req.topic_partitions is None:
        return None
    return normalized((tp.topic_id, tp.partitions) for tp in req.topic_partitions)


def _subset(a: Assignment | None, b: Assignment) -> bool:
    if a is None:
        return True
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


class ConsumerMembership:
    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self.bridge = ClassicBridge(self)
        self.downgrade: Callable[[Effects, Group, int], None] | None = None
        """Called when a consumer-protocol member left and only classic members
        remain (the facade turns the group classic: KIP-848's online downgrade)."""

    @property
    def config(self) -> GroupConfig:
        return self.store.config

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------

    def heartbeat(
        self, token: Token, now_ms: int, req: ConsumerGroupHeartbeatRequest, caller: Caller,
        topics: Topics,
    ) -> Effects:
        fx = Effects()
        try:
            answer = self._heartbeat(fx, now_ms, req, caller, topics)
        except HeartbeatError as exc:
            answer = ConsumerGroupHeartbeatResponse(
                error_code=exc.code, error_message=exc.message)
        return fx.reply(token, answer)

    def _validate(self, req: ConsumerGroupHeartbeatRequest, version: int) -> None:
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id:
            raise HeartbeatError(bad, "GroupId can't be empty.")
        if req.instance_id == "":
            raise HeartbeatError(bad, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise HeartbeatError(bad, "RackId can't be empty.")
        epoch = req.member_epoch
        if version >= 1 and not req.member_id:
            raise HeartbeatError(bad, "MemberId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or any(tp.partitions for tp in req.topic_partitions):
                raise HeartbeatError(bad, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and not req.subscribed_topic_regex:
                raise HeartbeatError(bad, "SubscribedTopicNames or SubscribedTopicRegex must "
                                          "be set in first request.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                raise HeartbeatError(bad, "InstanceId can't be null.")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise HeartbeatError(bad, f"MemberEpoch {epoch} is invalid.")
        elif epoch != -1 and not req.member_id:
            raise HeartbeatError(bad, "MemberId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {req.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(self.config.assignors)}.")
        if req.subscribed_topic_regex:
            try:
                compile_regex(req.subscribed_topic_regex)
            except re2.error as exc:
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex is not a valid regular "
                                     f"expression: {exc}.") from None

    def _heartbeat(
        self, fx: Effects, now_ms: int, req: ConsumerGroupHeartbeatRequest, caller: Caller,
        topics: Topics,
    ) -> ConsumerGroupHeartbeatResponse:
        self._validate(req, caller.version)
        code = self.store.coordinator_error(req.group_id)
        if code:
            raise HeartbeatError(code)
        group = self.store.groups.get(req.group_id)
        if group is not None and group.state is GroupState.DEAD:
            raise HeartbeatError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        upgrade = False
        if group is not None and group.consumer is None and not group.is_empty():
            if req.member_epoch != 0 or not self.bridge.can_upgrade(group):
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Group {req.group_id} is not a consumer group.")
            upgrade = True
        cg = group.consumer if group is not None else None
        if req.member_epoch in (-1, STATIC_LEAVE_EPOCH):
            return self._leave(fx, req, group, now_ms, topics)
        member = cg.members.get(req.member_id) if cg is not None else None
        owned = _owned(req)
        takeover: ConsumerMember | None = None
        if req.member_epoch == 0:
            if req.instance_id is not None and cg is not None:
                holder = cg.static_members.get(req.instance_id)
                if holder is not None and holder != req.member_id:
                    takeover = cg.members[holder]
                    if takeover.member_epoch != STATIC_LEAVE_EPOCH:
                        raise HeartbeatError(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {holder} with instance id {req.instance_id} is "
                            f"present in the consumer group.")
            if member is None and takeover is None and cg is not None and (
                    len(cg.members) >= self.config.consumer_max_size):
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self.config.consumer_max_size} members.")
        else:
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group "
                                     f"{req.group_id}.")
            if req.member_epoch > member.member_epoch or (
                req.member_epoch < member.member_epoch and not (
                    req.member_epoch == member.previous_member_epoch
                    and _subset(owned, member.assigned))):
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The consumer group member has a smaller member epoch "
                                     f"({req.member_epoch}) than the one known by the group "
                                     f"coordinator ({member.member_epoch}). The member must "
                                     f"abandon all its partitions and rejoin."
                                     if req.member_epoch < member.member_epoch else
                                     f"The consumer group member has a greater member epoch "
                                     f"({req.member_epoch}) than the one known by the group "
                                     f"coordinator ({member.member_epoch}).")
        # Accepted: from here on nothing is refused.
        if upgrade:
            assert group is not None
            self.bridge.upgrade(fx, group, dict(topics), now_ms)
            cg = group.consumer
            assert cg is not None
            member = cg.members.get(req.member_id)
        group = self._consumer_group(fx, req.group_id, group, now_ms)
        cg = group.consumer
        assert cg is not None
        joined = False
        if req.member_epoch == 0:
            member_id = req.member_id or self.store.new_member_id("")[1:]
            if takeover is not None:
                member = self._take_over(fx, group, takeover, member_id)
            elif member is None:
                member = ConsumerMember(member_id, instance_id=req.instance_id)
                cg.add(member)
                joined = True
            else:  # the same member id back from scratch: it owns nothing now
                member.assigned, member.pending_revocation = {}, {}
                member.member_epoch = member.previous_member_epoch = 0
                member.state = MemberState.STABLE
                member.revocation_deadline_ms = None
                fx.records.append(self.current_record(group.group_id, member))
        assert member is not None
        before = member.metadata_key()
        subscription_before = (list(member.subscribed_topic_names),
                               member.subscribed_topic_regex)
        self._update(member, req, caller)
        member.session_deadline_ms = now_ms + self.config.consumer_session_timeout_ms
        if joined or member.metadata_key() != before:
            fx.records.append(self.member_record(group.group_id, member))
        bump = joined or subscription_before != (member.subscribed_topic_names,
                                                 member.subscribed_topic_regex)
        self.refresh_and_assign(fx, group, topics, bump)
        assigned_before = member.assigned
        self.reconcile_member(fx, group, member, owned, now_ms, joined)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and owned is not None
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        answer = ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms)
        if full or member.assigned != assigned_before:
            answer.assignment = WireAssignment(topic_partitions=[
                WireTopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(member.assigned.items(), key=lambda kv: str(kv[0]))])
        return answer

    # -- the steps ----------------------------------------------------------------------

    def _consumer_group(
        self, fx: Effects, group_id: str, group: Group | None, now_ms: int
    ) -> Group:
        """The group as a consumer group: created, or converted from an empty
        classic group (its offsets stay)."""
        if group is None:
            group = self.store.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        if group.consumer is None:
            group.consumer = ConsumerGroup()
            group.protocol_type = "consumer"
            group.protocol_name = None
            group.generation = 0
            fx.records.append(cr.epoch_record(group_id, 0))
        return group

    def _take_over(
        self, fx: Effects, group: Group, old: ConsumerMember, member_id: str
    ) -> ConsumerMember:
        """A static member back under a new member id takes its old self's place,
        assignment and epoch (no rebalance)."""
        cg = group.consumer
        assert cg is not None
        target = cg.target.get(old.member_id, {})
        self._tombstones(fx, group.group_id, old.member_id)
        cg.remove(old.member_id)
        member = ConsumerMember(
            member_id, instance_id=old.instance_id, rack_id=old.rack_id,
            client_id=old.client_id, client_host=old.client_host,
            subscribed_topic_names=list(old.subscribed_topic_names),
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            member_epoch=old.previous_member_epoch, previous_member_epoch=old.previous_member_epoch,
            state=old.state, assigned=old.assigned, pending_revocation=old.pending_revocation)
        cg.add(member)
        fx.records.append(self.member_record(group.group_id, member))
        cg.target[member_id] = target
        fx.records.append(cr.target_member_record(group.group_id, member_id, target))
        fx.records.append(self.current_record(group.group_id, member))
        return member

    @staticmethod
    def _update(member: ConsumerMember, req: ConsumerGroupHeartbeatRequest, caller: Caller) -> None:
        member.client_id, member.client_host = caller.client_id, caller.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor or None

    @staticmethod
    def member_topics(member: ConsumerMember, topics: Topics) -> set[str]:
        """The names of the existing topics ``member`` subscribes to."""
        names = {n for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex:
            pattern = compile_regex(member.subscribed_topic_regex)
            names.update(n for n in topics
                         if not n.startswith("__") and pattern.fullmatch(n) is not None)
        return names

    def _refresh_subscription(self, fx: Effects, group: Group, topics: Topics) -> bool:
        """Recompute the subscribed topics' ids and partition counts; True (and a
        record) when they changed."""
        cg = group.consumer
        assert cg is not None
        wanted: set[str] = set()
        for m in cg.members.values():
            wanted |= self.member_topics(m, topics)
        subscription = {name: topics[name] for name in wanted}
        if subscription == cg.subscription:
            return False
        cg.subscription = subscription
        fx.records.append(cr.subscription_record(group.group_id, subscription))
        return True

    def _assign(self, fx: Effects, group: Group, topics: Topics) -> None:
        """A new target assignment at the group epoch."""
        cg = group.consumer
        assert cg is not None
        by_name = cg.subscription
        subs = {mid: frozenset(by_name[n][0] for n in self.member_topics(m, topics)
                               if n in by_name)
                for mid, m in cg.members.items()}
        counts = {tid: n for tid, n in by_name.values()}
        name = cg.preferred_assignor(self.config.assignors[0])
        target = ASSIGNORS[name](subs, counts, cg.target)
        for mid in sorted(cg.members):
            new = target.get(mid, {})
            if cg.target.get(mid) != new:
                fx.records.append(cr.target_member_record(group.group_id, mid, new))
        cg.target = {mid: target.get(mid, {}) for mid in cg.members}
        cg.assignment_epoch = cg.group_epoch
        fx.records.append(cr.target_epoch_record(group.group_id, cg.assignment_epoch))

    def refresh_and_assign(self, fx: Effects, group: Group, topics: Topics, bump: bool) -> None:
        """Bring the subscription metadata up to date, bump the group epoch if it
        (or ``bump``) says so, and compute a new target if the epoch is ahead."""
        cg = group.consumer
        assert cg is not None
        bump |= self._refresh_subscription(fx, group, topics)
        if bump:
            cg.group_epoch += 1
            self.store.rebalances["consumer"] += 1
            fx.records.append(cr.epoch_record(group.group_id, cg.group_epoch))
        if cg.group_epoch > cg.assignment_epoch:
            self._assign(fx, group, topics)

    def reconcile_member(
        self, fx: Effects, group: Group, member: ConsumerMember, owned: Assignment | None,
        now_ms: int, joined: bool,
    ) -> None:
        cg = group.consumer
        assert cg is not None
        holders = cg.holders()
        changed = reconcile(
            member, cg.assignment_epoch, cg.target.get(member.member_id, {}), owned,
            lambda t, p: holders.get((t, p), member.member_id) != member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_deadline_ms is None:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            member.revocation_deadline_ms = None
        if changed or joined:
            fx.records.append(self.current_record(group.group_id, member))

    # -- leaving ------------------------------------------------------------------------

    def _leave(
        self, fx: Effects, req: ConsumerGroupHeartbeatRequest, group: Group | None,
        now_ms: int, topics: Topics,
    ) -> ConsumerGroupHeartbeatResponse:
        cg = group.consumer if group is not None else None
        member: ConsumerMember | None = None
        if cg is not None:
            if req.instance_id is not None:
                mid = cg.static_members.get(req.instance_id)
                member = cg.members.get(mid) if mid is not None else None
                if member is not None and req.member_id and member.member_id != req.member_id:
                    raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                         f"Instance id {req.instance_id} is in use by another "
                                         f"member.")
            else:
                member = cg.members.get(req.member_id)
        if group is None or member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group "
                                 f"{req.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            fx.records.append(self.current_record(group.group_id, member))
        else:
            self.remove_member(fx, group, member.member_id, now_ms, topics)
            self._maybe_downgrade(fx, group, now_ms)
        return ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=req.member_epoch,
            heartbeat_interval_ms=0)

    def remove_member(
        self, fx: Effects, group: Group, member_id: str, now_ms: int, topics: Topics | None,
    ) -> None:
        """Tombstones for the member, a new group epoch (the target follows at the
        next heartbeat). ``topics`` None: keep the subscription metadata as it is."""
        cg = group.consumer
        assert cg is not None
        self._tombstones(fx, group.group_id, member_id)
        cg.remove(member_id)
        if topics is not None:
            self._refresh_subscription(fx, group, topics)
        else:
            wanted: set[str] = set()
            for m in cg.members.values():
                wanted |= {n for n in cg.subscription if n in m.subscribed_topic_names or (
                    m.subscribed_topic_regex is not None
                    and compile_regex(m.subscribed_topic_regex).fullmatch(n) is not None)}
            if wanted != set(cg.subscription):
                cg.subscription = {n: cg.subscription[n] for n in wanted}
                fx.records.append(cr.subscription_record(group.group_id, cg.subscription))
        cg.group_epoch += 1
        self.store.rebalances["consumer"] += 1
        fx.records.append(cr.epoch_record(group.group_id, cg.group_epoch))
        if not cg.members:
            group.state_timestamp_ms = now_ms

    @staticmethod
    def _tombstones(fx: Effects, group_id: str, member_id: str) -> None:
        fx.records += [cr.tombstone(cr.CURRENT_ASSIGNMENT, group_id, member_id),
                       cr.tombstone(cr.TARGET_MEMBER, group_id, member_id),
                       cr.tombstone(cr.MEMBER, group_id, member_id)]

    def to_classic(self, fx: Effects, group: Group) -> None:
        """An empty consumer group becomes a classic one (a JoinGroup arrived)."""
        cg = group.consumer
        assert cg is not None and not cg.members
        fx.records += cr.group_tombstones(group.group_id)
        group.consumer = None
        group.protocol_type = None

    # -- records ------------------------------------------------------------------------

    @staticmethod
    def member_record(group_id: str, m: ConsumerMember) -> cr.ConsumerRecord:
        return cr.ConsumerRecord(cr.MEMBER, group_id, m.member_id, cr.MemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=None if m.classic is None else cr.ClassicMemberMetadata(
                session_timeout_ms=m.classic.session_timeout_ms,
                supported_protocols=[cr.ClassicProtocol(name=n, metadata=d)
                                     for n, d in m.classic.protocols])))

    @staticmethod
    def current_record(group_id: str, m: ConsumerMember) -> cr.ConsumerRecord:
        return cr.ConsumerRecord(cr.CURRENT_ASSIGNMENT, group_id, m.member_id,
                                 cr.CurrentAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=int(m.state),
            assigned_partitions=cr.topic_partitions(m.assigned, cr.CurrentTopicPartitions),
            partitions_pending_revocation=cr.topic_partitions(
                m.pending_revocation, cr.CurrentTopicPartitions)))

    # -- offsets, as the offsets part asks ----------------------------------------------

    def validate_commit(
        self, group: Group, member_id: str, epoch: int, version: int, transactional: bool,
    ) -> ErrorCode:
        """May this member commit? Its epoch must be the one the coordinator has
        (STALE_MEMBER_EPOCH otherwise); OffsetCommit before v9 cannot speak for a
        member of a consumer group."""
        cg = group.consumer
        assert cg is not None
        if epoch < 0 and not cg.members:
            return ErrorCode.NONE
        member = cg.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member: generation = member epoch
            return ErrorCode.NONE if epoch == member.member_epoch else (
                ErrorCode.ILLEGAL_GENERATION)
        if not transactional and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_fetch(self, group: Group | None, member_id: str | None, epoch: int) -> ErrorCode:
        """OffsetFetch v9 from a member: it must be one, at its current epoch."""
        if epoch < 0 and not member_id:
            return ErrorCode.NONE
        cg = group.consumer if group is not None else None
        if cg is None:
            return ErrorCode.NONE if epoch < 0 else ErrorCode.UNKNOWN_MEMBER_ID
        member = cg.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # -- timers -------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Effects:
        """Remove members whose session expired or who did not revoke in time."""
        fx = Effects()
        for gid, group in sorted(self.store.groups.items()):
            cg = group.consumer
            if cg is None or self.store.is_loading(gid):
                continue
            removed_modern = False
            for mid, m in sorted(cg.members.items()):
                if m.session_deadline_ms <= now_ms or (
                        m.revocation_deadline_ms is not None
                        and m.revocation_deadline_ms <= now_ms):
                    removed_modern |= m.classic is None
                    self.remove_member(fx, group, mid, now_ms, None)
            if removed_modern:
                self._maybe_downgrade(fx, group, now_ms)
        return fx

    def _maybe_downgrade(self, fx: Effects, group: Group, now_ms: int) -> None:
        cg = group.consumer
        if self.downgrade is not None and cg is not None and cg.members and all(
                m.classic is not None for m in cg.members.values()):
            self.downgrade(fx, group, now_ms)

    def next_deadline_ms(self) -> int | None:
        due: list[int] = []
        for gid, group in self.store.groups.items():
            cg = group.consumer
            if cg is None or self.store.is_loading(gid):
                continue
            for m in cg.members.values():
                due.append(m.session_deadline_ms)
                if m.revocation_deadline_ms is not None:
                    due.append(m.revocation_deadline_ms)
        return min(due, default=None)

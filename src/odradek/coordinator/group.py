"""A classic consumer group: its members, state and committed offsets.

States (Kafka's names, as DescribeGroups and ListGroups report them)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲        │                                   │ leader's SyncGroup
      │                 │        └──no member left──▶ Empty           ▼
      └──last member leaves / expires──────────────────────────── Stable
                        ▲──member joins, leaves, expires, changes protocols──┘
    Dead: deleted (DeleteGroups) and about to disappear.

Invariants: every member id in ``static_members`` is in ``members``; the leader
is a member (or None when there is none); ``generation`` only grows; in
CompletingRebalance and Stable every member joined the current generation.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum

from odradek.coordinator.consumer.model import ConsumerGroup
from odradek.wire.internal.group_metadata_value import GroupMetadataValue, MemberMetadata
from odradek.wire.internal.offset_commit_value import OffsetCommitValue
from odradek.wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from odradek.wire.primitives import DecodeError

Token = Hashable
"""Names a request waiting for its answer; the IO shell maps it to a connection."""


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(name, metadata) in the member's order of preference."""
    assignment: bytes = b""
    join_token: Token | None = None
    """Set while a JoinGroup of this member waits for the rebalance to complete."""
    join_version: int = 0
    sync_token: Token | None = None
    """Set while a SyncGroup of this member waits for the leader's assignment."""
    heartbeat_deadline_ms: int = 0
    is_new: bool = True

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    """By member id, in joining order (the order of JoinGroup's member list)."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    pending_members: dict[str, int] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) -> expiry time."""
    offsets: dict[tuple[str, int], OffsetCommitValue] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    join_deadline_ms: int | None = None
    """PreparingRebalance: when the rebalance completes with whoever has joined."""
    initial_delay_until_ms: int | None = None
    """PreparingRebalance out of Empty: no completion before this
    (``group.initial.rebalance.delay.ms``)."""
    rebalance_limit_ms: int = 0
    """PreparingRebalance out of Empty: the initial delay is never extended past this."""
    joined_during_delay: bool = False
    sync_deadline_ms: int | None = None
    """CompletingRebalance: members that have not synced by then are removed."""
    consumer: ConsumerGroup | None = None
    """Set for a group of KIP-848's consumer protocol (its members and epochs live
    there; ``members`` above stays empty and ``state`` Empty)."""

    @property
    def kind(self) -> str:
        """``consumer`` or ``classic``, as ListGroups reports the group type."""
        return "classic" if self.consumer is None else "consumer"

    def is_empty(self) -> bool:
        """No member of either protocol (and, for a classic group, none joining)."""
        if self.consumer is not None:
            return not self.consumer.members
        return not self.members and not self.pending_members and self.state in (
            GroupState.EMPTY, GroupState.DEAD)

    # -- membership -------------------------------------------------------------------

    def add(self, member: Member) -> None:
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if self.protocol_type is None or len(self.members) == 1:
            self.protocol_type = member.protocol_type

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def all_joined(self) -> bool:
        return not self.pending_members and all(
            m.join_token is not None for m in self.members.values()
        )

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member speaking with a member id its instance no longer has."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    # -- protocols --------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(protocols)
        )

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred candidate; most votes win,
        ties go to the candidate named first by the earliest member."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values())).protocol_names()
        return max(sorted(votes, key=first.index), key=lambda n: votes[n])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None if unknown."""
        if self.protocol_type != "consumer" or not self.members:
            return set() if not self.members else None
        topics: set[str] = set()
        for m in self.members.values():
            data = m.metadata(self.protocol_name)
            try:
                version = int.from_bytes(data[:2], "big", signed=True)
                sub = ConsumerProtocolSubscription.decode(
                    memoryview(data)[2:], max(0, min(version, 3))
                )
            except (DecodeError, ValueError):
                return None
            topics.update(sub.topics)
        return topics

    # -- the persisted form -------------------------------------------------------------

    def snapshot(self) -> GroupMetadataValue:
        """The GroupMetadataValue of the current generation."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=[
                MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name), assignment=m.assignment,
                )
                for m in self.members.values()
            ],
        )

    @classmethod
    def restore(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
        """The group as its last record left it: Stable with its members (each
        must heartbeat within its session timeout from ``now_ms``), or Empty."""
        group = cls(group_id, generation=value.generation,
                    protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, state_timestamp_ms=value.current_state_timestamp)
        for mm in value.members:
            group.add(Member(
                member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                client_id=mm.client_id, client_host=mm.client_host,
                session_timeout_ms=mm.session_timeout,
                rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout > 0
                else mm.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mm.subscription)],
                assignment=mm.assignment,
                heartbeat_deadline_ms=now_ms + mm.session_timeout, is_new=False,
            ))
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

"""The state of a KIP-848 consumer group and its members.

A consumer group has three epochs:

* the **group epoch** grows whenever what the assignment depends on changes: a
  member joins or leaves, a subscription changes, or a subscribed topic gains
  partitions (or appears, for a regular expression);
* the **assignment epoch** is the group epoch the current target assignment
  was computed at (``assignment_epoch <= group_epoch``; the group is
  *Assigning* while they differ);
* each **member epoch** is the assignment epoch the member has reconciled to
  (*Reconciling* while some member is behind).

Invariants (checked by the simulation test after every event):

* a partition is in at most one member's ``assigned`` or
  ``pending_revocation`` (:meth:`ConsumerGroup.owner_of` is well defined);
  a member is handed a partition only once no other member holds it;
* a member's ``assigned`` and ``pending_revocation`` are disjoint;
* ``member_epoch <= assignment_epoch <= group_epoch`` for every member;
* ``static_members`` maps each instance id to a member that has it.

Topics are named by id (a recreated topic is another topic), as Kafka does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum, IntEnum

Assignment = dict[uuid.UUID, frozenset[int]]
"""Partitions by topic id; no topic maps to an empty set."""


def normalized(parts: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, ps in parts:
        out.setdefault(tid, set()).update(ps)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


def pairs(assignment: Assignment) -> Iterator[tuple[uuid.UUID, int]]:
    for tid, ps in assignment.items():
        for p in ps:
            yield tid, p


class MemberState(IntEnum):
    """Kafka's MemberState values, as ConsumerGroupCurrentMemberAssignmentValue stores them."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class ClassicInfo:
    """A member that speaks the classic protocol inside a consumer group
    (:mod:`.classic_members`): its protocols (name, metadata) in order of
    preference, and its session timeout."""

    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    """Set while UNREVOKED_PARTITIONS: the member is fenced if it has not revoked by then."""
    classic: ClassicInfo | None = None
    """Set for a member that uses the classic protocol (JoinGroup/SyncGroup)."""

    def metadata_key(self) -> tuple[object, ...]:
        """What the member metadata record holds (a change writes a new record)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                tuple(self.subscribed_topic_names), self.subscribed_topic_regex,
                self.server_assignor, self.rebalance_timeout_ms)

    def assignment_key(self) -> tuple[object, ...]:
        return (self.member_epoch, self.previous_member_epoch, self.state,
                self.assigned, self.pending_revocation)


@dataclass(slots=True)
class ConsumerGroup:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """Instance id -> member id."""
    target: dict[str, Assignment] = field(default_factory=dict)
    """Member id -> its partitions in the target assignment (of ``assignment_epoch``)."""
    subscription: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    """Subscribed topic name -> (topic id, partition count) the group epoch was bumped for."""

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_of(self, tid: uuid.UUID, partition: int) -> str | None:
        """The member holding the partition (assigned or still revoking), if any."""
        for m in self.members.values():
            if partition in m.assigned.get(tid, ()) or partition in m.pending_revocation.get(
                    tid, ()):
                return m.member_id
        return None

    def holders(self) -> dict[tuple[uuid.UUID, int], str]:
        out: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members.values():
            for key in pairs(m.assigned):
                out[key] = m.member_id
            for key in pairs(m.pending_revocation):
                out[key] = m.member_id
        return out

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is not None and member.instance_id is not None and (
                self.static_members.get(member.instance_id) == member_id):
            del self.static_members[member.instance_id]
        return member

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members asked for (ties: the first by name), else ``default``."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda n: (-votes[n], n))

"""Moving one member toward the target assignment, after Kafka's
CurrentAssignmentBuilder.

A member reconciles only when it heartbeats. From the partitions it has, the
partitions the target gives it, and who else still holds what:

* partitions it has and must give up go to ``pending_revocation``; while the
  member still owns any of them it is UNREVOKED_PARTITIONS, keeps its epoch and
  gets nothing new (the client revokes, then says so in a heartbeat);
* otherwise it moves to the target's epoch with the partitions it keeps plus
  the new ones no other member holds; if some are still held by another member
  (which has not revoked them yet) it is UNRELEASED_PARTITIONS and gets them at
  a later heartbeat once they are released; else STABLE.

So no partition is ever handed to two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from odradek.coordinator.consumer.model import Assignment, ConsumerMember, MemberState

HeldByOther = Callable[[uuid.UUID, int], bool]


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _and(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:  # the member did not say: assume it still has them
        return bool(revoking)
    return bool(_and(owned, revoking))


def reconcile(
    member: ConsumerMember, target_epoch: int, target: Assignment,
    owned: Assignment | None, held_by_other: HeldByOther,
) -> bool:
    """Advance ``member`` (in place) toward ``target``; ``owned`` is what its
    heartbeat says it owns (None: not said). True when anything changed."""
    before = member.assignment_key()
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return False
        _next(member, target_epoch, target, None, held_by_other)
    elif member.state is MemberState.UNRELEASED_PARTITIONS or (
            member.member_epoch != target_epoch):
        _next(member, target_epoch, target, owned, held_by_other)
    return member.assignment_key() != before


def _next(
    member: ConsumerMember, target_epoch: int, target: Assignment,
    owned: Assignment | None, held_by_other: HeldByOther,
) -> None:
    current = member.assigned
    keep = _and(current, target)
    revoke = _minus(current, target)
    if revoke and _owns_any(owned, revoke):
        member.assigned, member.pending_revocation = keep, revoke
        member.state = MemberState.UNREVOKED_PARTITIONS
        return
    new: dict[uuid.UUID, set[int]] = {t: set(ps) for t, ps in keep.items()}
    unreleased = False
    for t, ps in _minus(target, current).items():
        for p in ps:
            if held_by_other(t, p):
                unreleased = True
            else:
                new.setdefault(t, set()).add(p)
    member.assigned = {t: frozenset(ps) for t, ps in new.items() if ps}
    member.pending_revocation = {}
    member.revocation_deadline_ms = None
    if member.member_epoch != target_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = target_epoch
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

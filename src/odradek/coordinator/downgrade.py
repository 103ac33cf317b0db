"""KIP-848's online downgrade: a consumer group whose members all speak the
classic protocol becomes a classic group again, as Kafka 4.0 does.

It happens when the last member of the consumer protocol leaves (a heartbeat
with epoch -1, or its session or revocation deadline passing) and members
that joined with JoinGroup remain. The records, appended as one batch, are
the tombstones of every consumer-group record of the group (each member's
three, then the group's three) followed by a classic ``GroupMetadata`` record:
generation = the consumer group's epoch, protocol type ``consumer``, the
protocol every member supports with the most votes, and each member's current
assignment in the ``ConsumerProtocolAssignment`` format of the version its
subscription metadata has. The group is then Stable and a rebalance starts at
once (the caller's part), so each member's next heartbeat answers
REBALANCE_IN_PROGRESS (or ILLEGAL_GENERATION when its generation was older)
and the members join the classic group with the partitions they own.
"""

from __future__ import annotations

from odradek.coordinator.classic.rebalance import group_record, transition
from odradek.coordinator.consumer import records as cr
from odradek.coordinator.consumer.classic_members import encode_assignment
from odradek.coordinator.core import Effects
from odradek.coordinator.group import Group, GroupState, Member


def only_classic_left(group: Group) -> bool:
    cg = group.consumer
    return cg is not None and bool(cg.members) and all(
        m.classic is not None for m in cg.members.values())


def to_classic_group(fx: Effects, group: Group, now_ms: int) -> None:
    """Turn ``group`` (see :func:`only_classic_left`) into a Stable classic group."""
    cg = group.consumer
    assert cg is not None and only_classic_left(group)
    for mid in cg.members:
        fx.records += [cr.tombstone(cr.CURRENT_ASSIGNMENT, group.group_id, mid),
                       cr.tombstone(cr.TARGET_MEMBER, group.group_id, mid),
                       cr.tombstone(cr.MEMBER, group.group_id, mid)]
    fx.records += cr.group_tombstones(group.group_id)
    names = {tid: name for name, (tid, _) in cg.subscription.items()}
    group.consumer = None
    group.members, group.static_members, group.pending_members = {}, {}, {}
    group.leader_id = None
    group.protocol_type = "consumer"
    group.generation = cg.group_epoch
    for m in cg.members.values():
        assert m.classic is not None
        group.add(Member(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms, protocol_type="consumer",
            protocols=list(m.classic.protocols),
            heartbeat_deadline_ms=now_ms + m.classic.session_timeout_ms, is_new=False))
    group.protocol_name = group.select_protocol()
    for m in cg.members.values():
        member = group.members[m.member_id]
        data = member.metadata(group.protocol_name)
        version = int.from_bytes(data[:2], "big", signed=True) if len(data) >= 2 else 0
        member.assignment = encode_assignment(m.assigned, names.get, version)
    transition(group, GroupState.STABLE, now_ms)
    fx.records.append(group_record(group))

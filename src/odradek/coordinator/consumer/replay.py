"""Applying consumer-group records to the store while a ``__consumer_offsets``
partition loads (after that, the live group already is what its records say,
as for classic groups).

A record of a group that does not exist yet creates it as a consumer group; the
group epoch's tombstone turns it back into a plain holder of offsets (removed
when it has none), as a deleted or converted group leaves it.
"""

from __future__ import annotations

from odradek.coordinator.consumer import records as cr
from odradek.coordinator.consumer.model import (
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from odradek.coordinator.group import Group


def apply(groups: dict[str, Group], record: cr.ConsumerRecord, now_ms: int) -> None:
    group = groups.get(record.group)
    if record.kind == cr.EPOCH and record.value is None:
        if group is not None:
            group.consumer = None
            group.protocol_type = None
            if not group.offsets and not group.members:
                del groups[record.group]
        return
    if group is None:
        group = groups[record.group] = Group(record.group, state_timestamp_ms=now_ms)
    if group.consumer is None:
        group.consumer = ConsumerGroup()
        group.protocol_type, group.protocol_name = "consumer", None
        group.members.clear()
        group.static_members.clear()
        group.leader_id = None  # as the upgrade leaves it (a classic group's leader is gone)
    cg = group.consumer
    v = record.value
    mid = record.member or ""
    if record.kind == cr.EPOCH:
        cg.group_epoch = v.epoch
    elif record.kind == cr.TARGET_EPOCH:
        cg.assignment_epoch = 0 if v is None else v.assignment_epoch
    elif record.kind == cr.SUBSCRIPTION:
        cg.subscription = {} if v is None else {
            t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
    elif record.kind == cr.TARGET_MEMBER:
        if v is None:
            cg.target.pop(mid, None)
        else:
            cg.target[mid] = cr.from_topic_partitions(v.topic_partitions)
    elif record.kind == cr.MEMBER:
        if v is None:
            cg.remove(mid)
            if not cg.members:
                group.state_timestamp_ms = now_ms
            return
        member = cg.members.get(mid)
        if member is None:
            member = ConsumerMember(mid)
        elif member.instance_id is not None and member.instance_id != v.instance_id:
            cg.static_members.pop(member.instance_id, None)
        member.instance_id, member.rack_id = v.instance_id, v.rack_id
        member.client_id, member.client_host = v.client_id, v.client_host
        member.subscribed_topic_names = list(v.subscribed_topic_names)
        member.subscribed_topic_regex = v.subscribed_topic_regex
        member.rebalance_timeout_ms = v.rebalance_timeout_ms
        member.server_assignor = v.server_assignor
        c = v.classic_member_metadata
        member.classic = None if c is None else ClassicInfo(
            [(p.name, bytes(p.metadata)) for p in c.supported_protocols], c.session_timeout_ms)
        cg.add(member)
    elif record.kind == cr.CURRENT_ASSIGNMENT and v is not None:
        member = cg.members.get(mid)
        if member is None:
            member = ConsumerMember(mid)
            cg.add(member)
        member.member_epoch, member.previous_member_epoch = v.member_epoch, v.previous_member_epoch
        member.state = MemberState(v.state) if v.state in MemberState._value2member_map_ else (
            MemberState.UNKNOWN)
        member.assigned = cr.from_topic_partitions(v.assigned_partitions)
        member.pending_revocation = cr.from_topic_partitions(v.partitions_pending_revocation)


def loaded(group: Group, now_ms: int, session_timeout_ms: int) -> None:
    """The group's partition finished loading: every member gets a fresh session;
    one still revoking gets its rebalance timeout again."""
    cg = group.consumer
    if cg is None:
        return
    for m in cg.members.values():
        m.session_deadline_ms = now_ms + (session_timeout_ms if m.classic is None
                                          else m.classic.session_timeout_ms)
        m.revocation_deadline_ms = (now_ms + m.rebalance_timeout_ms
                                    if m.state is MemberState.UNREVOKED_PARTITIONS else None)

"""Group administration: DescribeGroups, ListGroups and DeleteGroups.

:class:`GroupAdmin` is a part of
:class:`~odradek.coordinator.coordinator.GroupCoordinator`. It reads the
shared :class:`~odradek.coordinator.store.GroupStore` and changes nothing but a
deleted group's state: DeleteGroups returns a tombstone for each of the
group's offsets and one for the group, and marks the group Dead so that no
request joins it before the tombstones are replayed (which removes it).

Only an Empty group with no members may be deleted (else NON_EMPTY_GROUP).
Groups whose ``__consumer_offsets`` partition is loading are not listed and
describe as Dead with COORDINATOR_LOAD_IN_PROGRESS.

Consumer groups (KIP-848) are listed with type ``consumer`` and their own
states (Empty, Assigning, Reconciling, Stable); ConsumerGroupDescribe describes
them. DescribeGroups shows them as Dead (GROUP_ID_NOT_FOUND from v6), and
ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a classic group, as Kafka
4.0 does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from odradek.coordinator.consumer.model import Assignment
from odradek.coordinator.consumer.records import group_tombstones
from odradek.coordinator.core import Effects
from odradek.coordinator.group import GroupState, Token
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import consumer_group_describe_response as cgd
from odradek.wire.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from odradek.wire.messages.list_groups_response import ListedGroup

S = GroupState


TopicName = Callable[[uuid.UUID], str | None]
CONSUMER_MEMBER = 1
CLASSIC_MEMBER = 0
"""KIP-1099's member types: the consumer protocol, the classic protocol."""


class GroupAdmin:
    def __init__(self, store: GroupStore) -> None:
        self.store = store

    # -- DescribeGroups, ListGroups -----------------------------------------------------

    def describe(self, group_id: str, version: int = 5) -> DescribedGroup:
        """DescribeGroups of one group. A group that does not exist, or is a
        consumer group, is Dead with no error before v6; v6 says
        GROUP_ID_NOT_FOUND with a message, as Kafka 4.0 does."""
        code = self.store.coordinator_error(group_id)
        group = self.store.groups.get(group_id)
        if code or group is None or group.consumer is not None:
            message = None
            if not code and version >= 6:
                code = ErrorCode.GROUP_ID_NOT_FOUND
                message = (f"Group {group_id} not found." if group is None
                           else f"Group {group_id} is not a classic group.")
            return DescribedGroup(
                error_code=code, error_message=message, group_id=group_id,
                group_state=S.DEAD.value, protocol_type="", protocol_data="",
            )
        stable = group.state is S.STABLE
        members = [
            DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            error_code=0, group_id=group_id, group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "", members=members,
        )

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[ListedGroup]:
        """Groups (case-insensitive filters on state and type; empty: all)."""
        wanted = {s.lower() for s in states} if states else None
        kinds = {t.lower() for t in types} if types else None
        out = []
        for gid, group in sorted(self.store.groups.items()):
            if self.store.is_loading(gid) or group.state is S.DEAD:
                continue
            state = (group.state.value if group.consumer is None
                     else group.consumer.state().value)
            if wanted is not None and state.lower() not in wanted:
                continue
            if kinds is not None and group.kind not in kinds:
                continue
            out.append(ListedGroup(
                group_id=gid, protocol_type=group.protocol_type or "",
                group_state=state, group_type=group.kind,
            ))
        return out

    def consumer_describe(self, group_id: str, topic_name: TopicName) -> cgd.DescribedGroup:
        """ConsumerGroupDescribe of one group."""
        code = self.store.coordinator_error(group_id)
        group = self.store.groups.get(group_id)
        if code:
            return cgd.DescribedGroup(error_code=code, group_id=group_id)
        if group is None or group.state is S.DEAD or group.consumer is None:
            message = (f"Group {group_id} not found." if group is None or group.state is S.DEAD
                       else f"Group {group_id} is not a consumer group.")
            return cgd.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                      error_message=message, group_id=group_id)
        cg = group.consumer

        def wire(a: Assignment) -> cgd.Assignment:
            return cgd.Assignment(topic_partitions=[
                cgd.TopicPartitions(topic_id=t, topic_name=topic_name(t) or "",
                                    partitions=sorted(ps))
                for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))])

        members = [
            cgd.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=wire(m.assigned), target_assignment=wire(cg.target.get(mid, {})),
                member_type=CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER)
            for mid, m in cg.members.items()
        ]
        return cgd.DescribedGroup(
            error_code=0, group_id=group_id, group_state=cg.state().value,
            group_epoch=cg.group_epoch, assignment_epoch=cg.assignment_epoch,
            assignor_name=cg.preferred_assignor(self.store.config.assignors[0]),
            members=members)

    # -- DeleteGroups -------------------------------------------------------------------

    def delete_groups(self, token: Token, group_ids: list[str]) -> Effects:
        """Answer: {group id: error}. A deleted group's offsets go with it."""
        fx = Effects()
        errors: dict[str, int] = {}
        for gid in group_ids:
            code, group = self.store.live_group(gid, ErrorCode.GROUP_ID_NOT_FOUND)
            if group is not None and (group.state is not S.EMPTY or not group.is_empty()):
                code = ErrorCode.NON_EMPTY_GROUP
            errors[gid] = code
            if code or group is None:
                continue
            for topic, partition in sorted(group.offsets):
                fx.records.append(OffsetRecord(gid, topic, partition, None))
            if group.consumer is not None:
                fx.records += group_tombstones(gid)
            fx.records.append(GroupRecord(gid, None))
            group.state = S.DEAD
        return fx.reply(token, errors)

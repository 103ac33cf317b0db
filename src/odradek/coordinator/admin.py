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
"""

from __future__ import annotations

from odradek.coordinator.core import Effects
from odradek.coordinator.group import GroupState, Token
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from odradek.wire.messages.list_groups_response import ListedGroup

S = GroupState


class GroupAdmin:
    def __init__(self, store: GroupStore) -> None:
        self.store = store

    # -- DescribeGroups, ListGroups -----------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        code = self.store.coordinator_error(group_id)
        group = self.store.groups.get(group_id)
        if code or group is None:
            return DescribedGroup(
                error_code=code, group_id=group_id, group_state=S.DEAD.value,
                protocol_type="", protocol_data="",
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

    def list_groups(self, states: list[str] | None = None) -> list[ListedGroup]:
        wanted = {s.lower() for s in states} if states else None
        out = []
        for gid, group in sorted(self.store.groups.items()):
            if self.store.is_loading(gid) or group.state is S.DEAD:
                continue
            if wanted is not None and group.state.value.lower() not in wanted:
                continue
            out.append(ListedGroup(
                group_id=gid, protocol_type=group.protocol_type or "",
                group_state=group.state.value, group_type="classic",
            ))
        return out

    # -- DeleteGroups -------------------------------------------------------------------

    def delete_groups(self, token: Token, group_ids: list[str]) -> Effects:
        """Answer: {group id: error}. A deleted group's offsets go with it."""
        fx = Effects()
        errors: dict[str, int] = {}
        for gid in group_ids:
            code, group = self.store.live_group(gid, ErrorCode.GROUP_ID_NOT_FOUND)
            if group is not None and (group.state is not S.EMPTY or group.members):
                code = ErrorCode.NON_EMPTY_GROUP
            errors[gid] = code
            if code or group is None:
                continue
            for topic, partition in sorted(group.offsets):
                fx.records.append(OffsetRecord(gid, topic, partition, None))
            fx.records.append(GroupRecord(gid, None))
            group.state = S.DEAD
        return fx.reply(token, errors)

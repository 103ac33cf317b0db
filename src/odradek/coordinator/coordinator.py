"""The group coordinator: membership (:mod:`.membership`), committed offsets
and group administration.

Offsets: OffsetCommit validates the committer (a member of the current
generation, or anyone for a group with no members when the generation is
negative — Kafka's "simple" consumers and admin tools) and returns one
OffsetCommit record per partition; the offsets change when the records are
replayed. OffsetFetch reads them; a partition never committed reads -1.
DeleteGroups and OffsetDelete write tombstones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator.core import Effects
from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.membership import Membership
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.offset_commit_value import OffsetCommitValue
from odradek.wire.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from odradek.wire.messages.list_groups_response import ListedGroup

S = GroupState
PartitionExists = Callable[[str, int], bool]


@dataclass(frozen=True, slots=True)
class Commit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    retention_ms: int
    commits: list[Commit]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str


class GroupCoordinator(Membership):
    # -- OffsetCommit -------------------------------------------------------------------

    def commit_offsets(
        self, token: Token, now_ms: int, req: CommitRequest, exists: PartitionExists
    ) -> Effects:
        """Answer: a dict (topic, partition) -> error code, in request order."""
        fx = Effects()
        code = self._commit_error(req, now_ms)
        errors: dict[tuple[str, int], int] = {}
        for c in req.commits:
            key = (c.topic, c.partition)
            if code:
                errors[key] = code
            elif not exists(c.topic, c.partition):
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif c.metadata is not None and (
                len(c.metadata.encode()) > self.config.offset_metadata_max_bytes
            ):
                errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                errors[key] = ErrorCode.NONE
                expire = now_ms + req.retention_ms if req.retention_ms >= 0 else -1
                value = OffsetCommitValue(
                    offset=c.offset, leader_epoch=c.leader_epoch, metadata=c.metadata or "",
                    commit_timestamp=now_ms, expire_timestamp=expire,
                )
                fx.records.append(OffsetRecord(req.group_id, c.topic, c.partition, value))
        return fx.reply(token, errors)

    def _commit_error(self, req: CommitRequest, now_ms: int) -> ErrorCode:
        code = self.coordinator_error(req.group_id)
        if code:
            return code
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation >= 0 or req.member_id:
                return ErrorCode.ILLEGAL_GENERATION
            self.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now_ms)
            return ErrorCode.NONE
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation < 0 and not req.member_id and group.state is S.EMPTY:
            return ErrorCode.NONE
        code = self._check_member(group, req.member_id, req.group_instance_id, req.generation)
        if code:
            return code
        if group.state is S.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.NONE

    # -- OffsetFetch --------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, wanted: Iterable[tuple[str, int]] | None
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of ``wanted`` partitions (None: every committed one)."""
        code = self.coordinator_error(group_id)
        if code:
            return code, []
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        keys = sorted(offsets) if wanted is None else list(wanted)
        out = []
        for topic, partition in keys:
            v = offsets.get((topic, partition))
            out.append(
                FetchedOffset(topic, partition, -1, -1, "") if v is None
                else FetchedOffset(topic, partition, v.offset, v.leader_epoch, v.metadata)
            )
        return ErrorCode.NONE, out

    # -- OffsetDelete -------------------------------------------------------------------

    def delete_offsets(
        self, token: Token, group_id: str, partitions: list[tuple[str, int]]
    ) -> Effects:
        """Answer: (group error, {(topic, partition): error})."""
        fx = Effects()
        code, group = self.live_group(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        if group is None:
            return fx.reply(token, (code, {}))
        subscribed = group.subscribed_topics()
        errors: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            in_use = group.members and (subscribed is None or topic in subscribed)
            if in_use:
                errors[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[(topic, partition)] = ErrorCode.NONE
            if (topic, partition) in group.offsets:
                fx.records.append(OffsetRecord(group_id, topic, partition, None))
        return fx.reply(token, (ErrorCode.NONE, errors))

    # -- DeleteGroups -------------------------------------------------------------------

    def delete_groups(self, token: Token, group_ids: list[str]) -> Effects:
        """Answer: {group id: error}. A deleted group's offsets go with it."""
        fx = Effects()
        errors: dict[str, int] = {}
        for gid in group_ids:
            code, group = self.live_group(gid, ErrorCode.GROUP_ID_NOT_FOUND)
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

    # -- cleanup ------------------------------------------------------------------------

    def delete_topic_offsets(self, topics: set[str]) -> Effects:
        """Tombstones for every committed offset of deleted ``topics`` (as Kafka
        cleans up when a topic goes)."""
        fx = Effects()
        for gid, group in sorted(self.groups.items()):
            if self.partition_of(gid) in self.loading:
                continue
            for topic, partition in sorted(group.offsets):
                if topic in topics:
                    fx.records.append(OffsetRecord(gid, topic, partition, None))
        return fx

    def expire_offsets(self, now_ms: int, retention_ms: int) -> Effects:
        """Kafka's offset expiry (KIP-211): only groups with no members lose
        offsets. An offset with an explicit expire time (OffsetCommit v2-4 with a
        retention) goes then; otherwise ``retention_ms`` after the group became
        Empty, or after the commit for a group that never had members. A group
        left with no members and no offsets is deleted."""
        fx = Effects()
        for gid, group in sorted(self.groups.items()):
            if self.partition_of(gid) in self.loading or group.state is not S.EMPTY:
                continue
            expired = []
            for key, v in sorted(group.offsets.items()):
                if v.expire_timestamp >= 0:
                    due = v.expire_timestamp
                elif group.protocol_type:
                    due = group.state_timestamp_ms + retention_ms
                else:
                    due = v.commit_timestamp + retention_ms
                if due <= now_ms:
                    expired.append(key)
            fx.records += [OffsetRecord(gid, t, p, None) for t, p in expired]
            if len(expired) == len(group.offsets) and not group.members:
                fx.records.append(GroupRecord(gid, None))
        return fx

    # -- DescribeGroups, ListGroups -----------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        code = self.coordinator_error(group_id)
        group = self.groups.get(group_id)
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
        for gid, group in sorted(self.groups.items()):
            if self.partition_of(gid) in self.loading or group.state is S.DEAD:
                continue
            if wanted is not None and group.state.value.lower() not in wanted:
                continue
            out.append(ListedGroup(
                group_id=gid, protocol_type=group.protocol_type or "",
                group_state=group.state.value, group_type="classic",
            ))
        return out

"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, offset expiry and
the clean-up after a topic is deleted.

:class:`Offsets` is a part of
:class:`~odradek.coordinator.coordinator.GroupCoordinator`. It never changes an
offset itself: each operation returns OffsetCommit records (a value, or a
tombstone), and the offsets change when the IO shell has appended the records
and replayed them (:meth:`~odradek.coordinator.store.GroupStore.replay`).

OffsetCommit validates the committer: anyone may commit for a group with no
members when the generation is negative (Kafka's "simple" consumers and admin
tools; a missing group is created, Empty); otherwise the group's membership
protocol decides (:class:`CommitValidator`, today
:meth:`~odradek.coordinator.classic.membership.ClassicMembership.validate_commit`).
Each partition then gets one record. OffsetFetch reads the offsets; a
partition never committed reads -1. OffsetDelete refuses partitions of topics
the group's members subscribe to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.coordinator.consumer.records import group_tombstones
from odradek.coordinator.core import Effects
from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.offset_commit_value import OffsetCommitValue

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
    version: int = 9
    """OffsetCommit's version (a member of a consumer group needs v9+)."""
    transactional: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: int = 0
    """UNSTABLE_OFFSET_COMMIT when asked to be stable and a transaction is open."""


class CommitValidator(Protocol):
    """The classic protocol's word on a commit by a member of an existing,
    live group (it may refresh the member's session)."""

    def validate_commit(
        self, group: Group, member_id: str, instance_id: str | None, generation: int,
        now_ms: int,
    ) -> ErrorCode: ...


class EpochValidator(Protocol):
    """The consumer protocol's word on a commit to a consumer group (member epochs)."""

    def validate_commit(
        self, group: Group, member_id: str, epoch: int, version: int, transactional: bool,
    ) -> ErrorCode: ...


class Offsets:
    def __init__(
        self, store: GroupStore, members: CommitValidator, consumer: EpochValidator
    ) -> None:
        self.store = store
        self.members = members
        self.consumer = consumer

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
                len(c.metadata.encode()) > self.store.config.offset_metadata_max_bytes
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
        code = self.store.coordinator_error(req.group_id)
        if code:
            return code
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.store.groups.get(req.group_id)
        if group is None:
            # Generation -1 is an admin client or a consumer outside group management
            # (whatever member id it names): a simple group is made. Otherwise the
            # group is gone: v9+ says so, older versions keep ILLEGAL_GENERATION.
            if req.generation >= 0:
                return (ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 and not req.transactional
                        else ErrorCode.ILLEGAL_GENERATION)
            self.store.groups[req.group_id] = Group(req.group_id, state_timestamp_ms=now_ms)
            return ErrorCode.NONE
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        anonymous = req.generation < 0 and not req.member_id and req.group_instance_id is None
        if group.consumer is not None:
            if req.transactional and anonymous:
                return ErrorCode.NONE
            return self.consumer.validate_commit(group, req.member_id, req.generation,
                                                 req.version, req.transactional)
        if req.generation < 0 and group.state is S.EMPTY:
            return ErrorCode.NONE
        if anonymous:
            # TxnOffsetCommit v0-v2 carry no member id or generation: a transactional
            # commit needs none; a plain one from outside a live group is refused.
            return ErrorCode.NONE if req.transactional else ErrorCode.UNKNOWN_MEMBER_ID
        return self.members.validate_commit(
            group, req.member_id, req.group_instance_id, req.generation, now_ms
        )

    # -- OffsetFetch --------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, wanted: Iterable[tuple[str, int]] | None,
        require_stable: bool = False, view: Mapping[tuple[str, int], Any] | None = None,
        unstable: Collection[tuple[str, int]] = (),
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of ``wanted`` partitions (None: every committed one),
        from ``view`` when given. With ``require_stable`` a partition an open
        transaction committed to, or one in ``unstable`` (its transaction's
        marker not committed yet), answers UNSTABLE_OFFSET_COMMIT (the client
        retries)."""
        code = self.store.coordinator_error(group_id)
        if code:
            return code, []
        group = self.store.groups.get(group_id)
        offsets = view if view is not None else group.offsets if group is not None else {}
        keys = sorted(offsets) if wanted is None else list(wanted)
        out = []
        for topic, partition in keys:
            v = offsets.get((topic, partition))
            if require_stable and (self.store.has_pending(group_id, topic, partition)
                                   or (topic, partition) in unstable):
                out.append(FetchedOffset(topic, partition, -1, -1, "",
                                         ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            out.append(
                FetchedOffset(topic, partition, -1, -1, "") if v is None
                else FetchedOffset(topic, partition, v.offset, v.leader_epoch, v.metadata)
            )
        return ErrorCode.NONE, out

    # -- TxnOffsetCommit ----------------------------------------------------------------

    def txn_commit_offsets(
        self, now_ms: int, req: CommitRequest, exists: PartitionExists
    ) -> tuple[dict[tuple[str, int], int], list[OffsetRecord]]:
        """Offsets committed inside a transaction: the same validation as a commit,
        records to append as the producer's transactional batch. Answer: a dict
        (topic, partition) -> error code, and the records."""
        fx = self.commit_offsets(0, now_ms, dataclasses.replace(req, transactional=True), exists)
        errors: dict[tuple[str, int], int] = fx.replies[0][1]
        return errors, [r for r in fx.records if isinstance(r, OffsetRecord)]

    # -- OffsetDelete -------------------------------------------------------------------

    def delete_offsets(
        self, token: Token, group_id: str, partitions: list[tuple[str, int]]
    ) -> Effects:
        """Answer: (group error, {(topic, partition): error})."""
        fx = Effects()
        code, group = self.store.live_group(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        if group is None:
            return fx.reply(token, (code, {}))
        subscribed = group.subscribed_topics()
        has_members = bool(group.members)
        if group.consumer is not None:
            subscribed = set(group.consumer.subscription)
            has_members = bool(group.consumer.members)
        errors: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            in_use = has_members and (subscribed is None or topic in subscribed)
            if in_use:
                errors[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[(topic, partition)] = ErrorCode.NONE
            if (topic, partition) in group.offsets:
                fx.records.append(OffsetRecord(group_id, topic, partition, None))
        return fx.reply(token, (ErrorCode.NONE, errors))

    # -- cleanup ------------------------------------------------------------------------

    def delete_topic_offsets(self, topics: set[str]) -> Effects:
        """Tombstones for every committed offset of deleted ``topics`` (as Kafka
        cleans up when a topic goes)."""
        fx = Effects()
        for gid, group in sorted(self.store.groups.items()):
            if self.store.is_loading(gid):
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
        for gid, group in sorted(self.store.groups.items()):
            if self.store.is_loading(gid) or group.state is not S.EMPTY or not group.is_empty():
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
            if len(expired) == len(group.offsets) and group.is_empty():
                if group.consumer is not None:
                    fx.records += group_tombstones(gid)
                fx.records.append(GroupRecord(gid, None))
        return fx

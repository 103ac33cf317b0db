"""What every group operation shares: configuration, effects, loading and replay.

The coordinator is plain code: an operation takes a token naming the request,
``now_ms`` and the request, and returns :class:`Effects` — records to append
to ``__consumer_offsets`` and answers for waiting requests (possibly other
requests than the one just made: a JoinGroup completes everyone's join). The
IO shell appends the records, replays them (:meth:`CoordinatorBase.replay`),
and only then sends the answers, so nothing is acknowledged before it is in
the log. :meth:`next_deadline_ms` says when :meth:`poll` must run next.

What is state and what is a record, as in Kafka's classic groups: committed
offsets change only by replay. Membership (who has joined, heartbeat times,
waiting requests) is soft state held here; each completed generation (the
leader's SyncGroup), each transition to Empty and each deletion is written as
a GroupMetadata record, and start-up rebuilds groups from those records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.records import CoordinatorRecord, GroupRecord, OffsetRecord, partition_for
from odradek.wire.errors import ErrorCode

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's broker settings for groups (names in ``from_properties``)."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = INT32_MAX
    offsets_partitions: int = 50
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_properties(cls, get_int: Callable[[str], int]) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=get_int("group.max.session.timeout.ms"),
            max_size=get_int("group.max.size"),
            offsets_partitions=get_int("offsets.topic.num.partitions"),
            offset_metadata_max_bytes=get_int("offset.metadata.max.bytes"),
        )


@dataclass(slots=True)
class Effects:
    records: list[CoordinatorRecord] = field(default_factory=list)
    replies: list[tuple[Token, Any]] = field(default_factory=list)

    def reply(self, token: Token, response: Any) -> Effects:
        self.replies.append((token, response))
        return self


class CoordinatorBase:
    def __init__(
        self, config: GroupConfig, new_id: Callable[[], str] | None = None
    ) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self.loading: set[int] = set(range(config.offsets_partitions))
        """``__consumer_offsets`` partitions not yet replayed: their groups wait."""
        self._new_id = new_id or (lambda: str(uuid.uuid4()))

    # -- loading ------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def loaded(self, partition: int, now_ms: int) -> None:
        """Every record of ``partition`` has been replayed: serve its groups.
        Members restored from records get a fresh session from ``now_ms``."""
        self.loading.discard(partition)
        for group in self.groups.values():
            if self.partition_of(group.group_id) == partition:
                for m in group.members.values():
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def coordinator_error(self, group_id: str) -> ErrorCode:
        if self.partition_of(group_id) in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def live_group(self, group_id: str, missing: ErrorCode) -> tuple[ErrorCode, Group | None]:
        """The group, or the error to answer instead: its partition is loading,
        or ``missing`` when it does not exist (or is being deleted)."""
        code = self.coordinator_error(group_id)
        if code:
            return code, None
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return missing, None
        return ErrorCode.NONE, group

    # -- replay -------------------------------------------------------------------------

    def replay(self, records: Iterable[CoordinatorRecord], now_ms: int = 0) -> None:
        """Apply records (at start-up, and after each append of an operation's records).

        Offsets are set or deleted. A group record rebuilds the group only while
        its partition loads; afterwards the live group already is what the record
        says. A group tombstone removes the group and its offsets.
        """
        for record in records:
            if isinstance(record, OffsetRecord):
                self._replay_offset(record)
            elif record.value is None:
                self.groups.pop(record.group, None)
            elif self.partition_of(record.group) in self.loading:
                old = self.groups.get(record.group)
                group = Group.restore(record.group, record.value, now_ms)
                if old is not None:
                    group.offsets = old.offsets
                self.groups[record.group] = group

    def _replay_offset(self, record: OffsetRecord) -> None:
        group = self.groups.get(record.group)
        key = (record.topic, record.partition)
        if record.value is None:
            if group is not None:
                group.offsets.pop(key, None)
            return
        if group is None:
            group = self.groups[record.group] = Group(record.group)
        group.offsets[key] = record.value

    # -- helpers ------------------------------------------------------------------------

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{self._new_id()}"

    def transition(self, group: Group, state: GroupState, now_ms: int) -> None:
        group.state = state
        group.state_timestamp_ms = now_ms

    @staticmethod
    def group_record(group: Group) -> GroupRecord:
        return GroupRecord(group.group_id, group.snapshot())

    def next_deadline_ms(self) -> int | None:
        """The earliest time :meth:`poll` has work to do; None when there is none."""
        best: int | None = None

        def consider(t: int | None) -> None:
            nonlocal best
            if t is not None and (best is None or t < best):
                best = t

        for group in self.groups.values():
            consider(group.join_deadline_ms)
            consider(group.sync_deadline_ms)
            for t in group.pending_members.values():
                consider(t)
            for m in group.members.values():
                if m.join_token is None and m.sync_token is None:
                    consider(m.heartbeat_deadline_ms)
        return best

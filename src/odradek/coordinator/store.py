"""The state every part of the group coordinator shares, and the only code that
applies records to it.

:class:`GroupStore` holds the configuration, the groups by id (with their
members and committed offsets), the ``__consumer_offsets`` partitions still
loading, and the source of new member ids. The parts of
:mod:`odradek.coordinator.coordinator` (offsets, classic membership, admin)
each hold a reference to the one store and read and change its groups.

Invariants:

* Committed offsets change only in :meth:`GroupStore.replay`: a part that
  commits or deletes offsets returns records and the IO shell replays them
  after appending them. Group tombstones also take effect here.
* A GroupMetadata record rebuilds a group only while the group's partition is
  in :attr:`GroupStore.loading`. Once loaded, membership is soft state held by
  the membership part (docs/decisions.md), and the live group already is what
  its records say.
* While a group's partition is loading its requests get
  COORDINATOR_LOAD_IN_PROGRESS (:meth:`GroupStore.coordinator_error`), and
  background work (offset expiry, topic clean-up, ListGroups) skips it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from odradek.coordinator.core import GroupConfig
from odradek.coordinator.group import Group, GroupState
from odradek.coordinator.records import CoordinatorRecord, OffsetRecord, partition_for
from odradek.wire.errors import ErrorCode


class GroupStore:
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

    def is_loading(self, group_id: str) -> bool:
        """The partition of ``group_id`` has not been replayed yet."""
        return self.partition_of(group_id) in self.loading

    def loaded(self, partition: int, now_ms: int) -> None:
        """Every record of ``partition`` has been replayed: serve its groups.
        Members restored from records get a fresh session from ``now_ms``."""
        self.loading.discard(partition)
        for group in self.groups.values():
            if self.partition_of(group.group_id) == partition:
                for m in group.members.values():
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def coordinator_error(self, group_id: str) -> ErrorCode:
        if self.is_loading(group_id):
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
            elif self.is_loading(record.group):
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

    # -- ids ----------------------------------------------------------------------------

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{self._new_id()}"

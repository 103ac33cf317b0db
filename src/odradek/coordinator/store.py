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
* Offsets committed in a transaction (TxnOffsetCommit) wait in
  :attr:`GroupStore.pending_txn` until the producer's marker reaches their
  partition: COMMIT applies them, ABORT drops them. A plain commit of the same
  partition replayed after the transactional record wins over it (Kafka's
  rule: the pending offset applies only if its record is the later one).
* While a group's partition is loading its requests get
  COORDINATOR_LOAD_IN_PROGRESS (:meth:`GroupStore.coordinator_error`), and
  background work (offset expiry, topic clean-up, ListGroups) skips it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from odradek.coordinator.consumer import replay as consumer_replay
from odradek.coordinator.consumer.records import ConsumerRecord
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
        self.foreign: set[int] = set()
        """Partitions another broker leads (cluster mode): their groups are not ours."""
        self._new_id = new_id or (lambda: str(uuid.uuid4()))
        self.pending_txn: dict[int, dict[tuple[str, str, int], OffsetRecord]] = {}
        """Producer id -> offsets its open transaction committed, by (group, topic,
        partition)."""
        self._pending_keys: dict[tuple[str, str, int], set[int]] = {}
        self.rebalances: dict[str, int] = {"classic": 0, "consumer": 0}
        """Rebalances begun here, by protocol (a metric, never persisted): a classic
        group entering PreparingRebalance, a consumer group's epoch bumped by a
        live operation (not by replay)."""

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
                consumer_replay.loaded(group, now_ms, self.config.consumer_session_timeout_ms)

    def unload(self, partition: int) -> None:
        """This broker stopped leading ``partition`` (cluster mode): forget its groups
        and their pending transactional offsets; requests for them get
        NOT_COORDINATOR and clients find the new coordinator."""
        self.foreign.add(partition)
        self.loading.discard(partition)
        for gid in [g for g in self.groups if self.partition_of(g) == partition]:
            del self.groups[gid]
        for pid in list(self.pending_txn):
            pending = self.pending_txn[pid]
            for key in [k for k in pending if self.partition_of(k[0]) == partition]:
                del pending[key]
                owners = self._pending_keys.get(key)
                if owners is not None:
                    owners.discard(pid)
                    if not owners:
                        del self._pending_keys[key]
            if not pending:
                del self.pending_txn[pid]

    def begin_load(self, partition: int) -> None:
        """This broker now leads ``partition``: its groups wait while it is replayed."""
        self.unload(partition)
        self.foreign.discard(partition)
        self.loading.add(partition)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        if self.partition_of(group_id) in self.foreign:
            return ErrorCode.NOT_COORDINATOR
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
            elif isinstance(record, ConsumerRecord):
                if self.is_loading(record.group):
                    consumer_replay.apply(self.groups, record, now_ms)
            elif record.value is None:
                self.groups.pop(record.group, None)
            elif self.is_loading(record.group):
                old = self.groups.get(record.group)
                group = Group.restore(record.group, record.value, now_ms)
                if old is not None:
                    group.offsets = old.offsets
                self.groups[record.group] = group

    def replay_txn(self, producer_id: int, records: Iterable[CoordinatorRecord]) -> None:
        """Offsets of ``producer_id``'s open transaction (not visible until COMMIT)."""
        pending = self.pending_txn.setdefault(producer_id, {})
        for record in records:
            if isinstance(record, OffsetRecord):
                key = (record.group, record.topic, record.partition)
                pending[key] = record
                self._pending_keys.setdefault(key, set()).add(producer_id)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """``producer_id``'s transaction ended here: apply (COMMIT) or drop its offsets."""
        pending = self.pending_txn.pop(producer_id, {})
        for key, record in pending.items():
            owners = self._pending_keys.get(key)
            if owners is not None:
                owners.discard(producer_id)
                if not owners:
                    del self._pending_keys[key]
            if commit:
                self._replay_offset(record, transactional=True)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """An open transaction committed an offset here (OffsetFetch RequireStable)."""
        return (group, topic, partition) in self._pending_keys

    def _replay_offset(self, record: OffsetRecord, *, transactional: bool = False) -> None:
        group = self.groups.get(record.group)
        key = (record.topic, record.partition)
        if not transactional:
            owners = self._pending_keys.pop((record.group, *key), None)
            for pid in owners or ():
                self.pending_txn.get(pid, {}).pop((record.group, *key), None)
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

"""The group coordinator: a facade over composed parts.

:class:`GroupCoordinator` is what the IO shell (``broker/coordinators/group_runtime.py`` and the
group handlers) calls; it owns the parts and delegates, holding no state and
no logic of its own:

=====================  =================================================================
part                   owns
=====================  =================================================================
``store``              :class:`~.store.GroupStore`: config, the groups dict (members and
                       committed offsets), loading ``__consumer_offsets`` partitions,
                       replay of records, member ids
``classic``            :class:`~.membership.ClassicMembership`: JoinGroup, SyncGroup,
                       Heartbeat, LeaveGroup, and their timers (:mod:`.classic.rebalance`)
``consumer``           :class:`~.consumer.membership.ConsumerMembership`: KIP-848's
                       ConsumerGroupHeartbeat, its timers, epochs of commits and fetches
``offsets``            :class:`~.offsets.Offsets`: OffsetCommit, OffsetFetch,
                       OffsetDelete, offset expiry, offsets of deleted topics
``admin``              :class:`~.admin.GroupAdmin`: DescribeGroups, ListGroups,
                       DeleteGroups, ConsumerGroupDescribe
=====================  =================================================================

Invariants: every part shares the one store; only :meth:`GroupStore.replay`
changes committed offsets (DESIGN.md decision 4), the membership parts own the
soft state of membership (docs/decisions.md). A part that has timers provides
``poll(now_ms)`` and ``next_deadline_ms()``; the facade polls every such part
and reports the earliest deadline. Commit validation goes to the protocol of
the group (:class:`~.offsets.CommitValidator`). A JoinGroup for an empty
consumer group converts it to a classic group first.

:class:`Commit`, :class:`CommitRequest` and :class:`FetchedOffset` are defined
in :mod:`.offsets` and importable from here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

from odradek.coordinator.admin import GroupAdmin
from odradek.coordinator.classic.membership import ClassicMembership, Leaving
from odradek.coordinator.consumer.membership import Caller, ConsumerMembership, Topics
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.downgrade import to_classic_group
from odradek.coordinator.group import Group, GroupState, Token
from odradek.coordinator.offsets import (
    Commit,
    CommitRequest,
    FetchedOffset,
    Offsets,
    PartitionExists,
)
from odradek.coordinator.records import CoordinatorRecord, OffsetRecord
from odradek.coordinator.store import GroupStore
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_describe_response import (
    DescribedGroup as ConsumerDescribedGroup,
)
from odradek.wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from odradek.wire.messages.describe_groups_response import DescribedGroup
from odradek.wire.messages.join_group_request import JoinGroupRequest
from odradek.wire.messages.list_groups_response import ListedGroup
from odradek.wire.messages.sync_group_request import SyncGroupRequest

TopicsSource = Callable[[], Topics]
"""The cluster's topics, asked for only when a consumer group needs them."""

__all__ = [
    "Commit", "CommitRequest", "FetchedOffset", "GroupCoordinator", "PartitionExists", "Timed",
]


class Timed(Protocol):
    """A part with timers."""

    def poll(self, now_ms: int) -> Effects: ...

    def next_deadline_ms(self) -> int | None: ...


class GroupCoordinator:
    def __init__(
        self, config: GroupConfig, new_id: Callable[[], str] | None = None
    ) -> None:
        self.store = GroupStore(config, new_id)
        self.classic = ClassicMembership(self.store)
        self.consumer = ConsumerMembership(self.store)
        self.consumer.downgrade = self._downgrade
        self.offsets = Offsets(self.store, self.classic, self.consumer)
        self.admin = GroupAdmin(self.store)
        self._timed: tuple[Timed, ...] = (self.classic, self.consumer)

    # -- the shared state ---------------------------------------------------------------

    @property
    def config(self) -> GroupConfig:
        return self.store.config

    @property
    def groups(self) -> dict[str, Group]:
        return self.store.groups

    @property
    def loading(self) -> set[int]:
        """``__consumer_offsets`` partitions not yet replayed: their groups wait."""
        return self.store.loading

    def partition_of(self, group_id: str) -> int:
        return self.store.partition_of(group_id)

    def loaded(self, partition: int, now_ms: int) -> None:
        """Every record of ``partition`` has been replayed: serve its groups."""
        self.store.loaded(partition, now_ms)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        return self.store.coordinator_error(group_id)

    def replay(self, records: Iterable[CoordinatorRecord], now_ms: int = 0) -> None:
        """Apply records (at start-up, and after each append of an operation's records)."""
        self.store.replay(records, now_ms)

    # -- timers -------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Effects:
        """Run every part's timers due by ``now_ms``."""
        fx = Effects()
        for part in self._timed:
            fx.extend(part.poll(now_ms))
        return fx

    def next_deadline_ms(self) -> int | None:
        """The earliest time :meth:`poll` has work to do; None when there is none."""
        due = [part.next_deadline_ms() for part in self._timed]
        return min((t for t in due if t is not None), default=None)

    def _downgrade(self, fx: Effects, group: Group, now_ms: int) -> None:
        """The last consumer-protocol member left: the classic members that remain
        make the group classic again, and rejoin it (KIP-848's online downgrade)."""
        to_classic_group(fx, group, now_ms)
        self.classic.rebalance.prepare(fx, group, now_ms)

    # -- classic membership -------------------------------------------------------------

    def _bridged(self, group_id: str) -> bool:
        """A consumer group answering classic requests itself (KIP-848's upgrade)."""
        group = self.store.groups.get(group_id)
        return (group is not None and group.consumer is not None
                and group.state is not GroupState.DEAD
                and not self.store.coordinator_error(group_id))

    def join(
        self, token: Token, now_ms: int, version: int, req: JoinGroupRequest,
        client_id: str, client_host: str, topics: TopicsSource = dict,
    ) -> Effects:
        """A JoinGroup. For a consumer group: an empty one becomes classic again;
        otherwise its classic members are served by the consumer group."""
        if self._bridged(req.group_id):
            group = self.store.groups[req.group_id]
            assert group.consumer is not None
            if group.consumer.members:
                return self.consumer.bridge.join(token, now_ms, version, req, client_id,
                                                  client_host, dict(topics()))
            fx = Effects()
            self.consumer.to_classic(fx, group)
            return fx.extend(self.classic.join(token, now_ms, version, req, client_id,
                                               client_host))
        return self.classic.join(token, now_ms, version, req, client_id, client_host)

    def sync(self, token: Token, now_ms: int, req: SyncGroupRequest,
             topics: TopicsSource = dict) -> Effects:
        if self._bridged(req.group_id):
            by_id = {tid: name for name, (tid, _) in topics().items()}
            return self.consumer.bridge.sync(token, now_ms, req, by_id.get)
        return self.classic.sync(token, now_ms, req)

    def heartbeat(
        self, token: Token, now_ms: int, group_id: str, member_id: str,
        instance_id: str | None, generation: int, topics: TopicsSource = dict,
    ) -> Effects:
        if self._bridged(group_id):
            return self.consumer.bridge.heartbeat(token, now_ms, group_id, member_id,
                                                  generation, dict(topics()))
        return self.classic.heartbeat(token, now_ms, group_id, member_id, instance_id,
                                      generation)

    def leave(
        self, token: Token, now_ms: int, group_id: str, leaving: list[Leaving]
    ) -> Effects:
        if self._bridged(group_id):
            return self.consumer.bridge.leave(
                token, now_ms, group_id, [(w.member_id, w.group_instance_id) for w in leaving])
        return self.classic.leave(token, now_ms, group_id, leaving)

    # -- KIP-848 consumer groups --------------------------------------------------------

    def consumer_heartbeat(
        self, token: Token, now_ms: int, req: ConsumerGroupHeartbeatRequest, caller: Caller,
        topics: Topics,
    ) -> Effects:
        return self.consumer.heartbeat(token, now_ms, req, caller, topics)

    def consumer_describe(
        self, group_id: str, topic_name: Callable[[uuid.UUID], str | None]
    ) -> ConsumerDescribedGroup:
        return self.admin.consumer_describe(group_id, topic_name)

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(
        self, token: Token, now_ms: int, req: CommitRequest, exists: PartitionExists
    ) -> Effects:
        """Answer: a dict (topic, partition) -> error code, in request order."""
        return self.offsets.commit_offsets(token, now_ms, req, exists)

    def fetch_offsets(
        self, group_id: str, wanted: Iterable[tuple[str, int]] | None,
        require_stable: bool = False, member: tuple[str | None, int] | None = None,
        view: Mapping[tuple[str, int], Any] | None = None,
        unstable: Collection[tuple[str, int]] = (),
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        """Committed offsets of ``wanted`` partitions (None: every committed one).
        ``member``: (member id, member epoch) of OffsetFetch v9, checked first.
        ``view``: the group's offsets to answer from instead of its current ones
        (the shell's committed view while a write is in flight); ``unstable``:
        partitions still pending in that view (a transaction's marker in flight)."""
        if member is not None:
            code = self.store.coordinator_error(group_id)
            if not code:
                code = self.consumer.validate_fetch(self.store.groups.get(group_id), *member)
            if code:
                return code, []
        return self.offsets.fetch_offsets(group_id, wanted, require_stable, view, unstable)

    def txn_commit_offsets(
        self, now_ms: int, req: CommitRequest, exists: PartitionExists
    ) -> tuple[dict[tuple[str, int], int], list[OffsetRecord]]:
        """TxnOffsetCommit: errors per partition and the records to append as the
        producer's transactional batch (then :meth:`replay_txn`)."""
        return self.offsets.txn_commit_offsets(now_ms, req, exists)

    def replay_txn(self, producer_id: int, records: Iterable[CoordinatorRecord]) -> None:
        self.store.replay_txn(producer_id, records)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.store.replay_marker(producer_id, commit)

    def delete_offsets(
        self, token: Token, group_id: str, partitions: list[tuple[str, int]]
    ) -> Effects:
        """Answer: (group error, {(topic, partition): error})."""
        return self.offsets.delete_offsets(token, group_id, partitions)

    def delete_topic_offsets(self, topics: set[str]) -> Effects:
        return self.offsets.delete_topic_offsets(topics)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> Effects:
        return self.offsets.expire_offsets(now_ms, retention_ms)

    # -- administration -----------------------------------------------------------------

    def describe(self, group_id: str, version: int = 5) -> DescribedGroup:
        return self.admin.describe(group_id, version)

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[ListedGroup]:
        return self.admin.list_groups(states, types)

    def delete_groups(self, token: Token, group_ids: list[str]) -> Effects:
        """Answer: {group id: error}. A deleted group's offsets go with it."""
        return self.admin.delete_groups(token, group_ids)

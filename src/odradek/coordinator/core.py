"""The vocabulary every part of the group coordinator speaks: its configuration
and the :class:`Effects` an operation returns.

The coordinator is plain code: an operation takes a token naming the request,
``now_ms`` and the request, and returns :class:`Effects` — records to append
to ``__consumer_offsets`` and answers for waiting requests (possibly other
requests than the one just made: a JoinGroup completes everyone's join). The
IO shell appends the records, replays them
(:meth:`~odradek.coordinator.store.GroupStore.replay`), and only then sends
the answers, so nothing is acknowledged before it is in the log.

The parts that use this vocabulary, and what each owns, are listed in
:mod:`odradek.coordinator.coordinator`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.consumer.assignors import assignor_name
from odradek.coordinator.group import Token
from odradek.coordinator.records import CoordinatorRecord

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
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = INT32_MAX
    assignors: tuple[str, ...] = ("uniform", "range")
    """``group.consumer.assignors``: the first is the default."""

    @classmethod
    def from_properties(
        cls, get_int: Callable[[str], int], get_str: Callable[[str], str] | None = None,
    ) -> GroupConfig:
        assignors: tuple[str, ...] = ("uniform", "range")
        if get_str is not None:
            named = tuple(assignor_name(a) for a in get_str("group.consumer.assignors").split(",")
                          if a.strip())
            assignors = named or assignors
        return cls(
            consumer_session_timeout_ms=get_int("group.consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms=get_int("group.consumer.heartbeat.interval.ms"),
            consumer_max_size=get_int("group.consumer.max.size"),
            assignors=assignors,
            initial_rebalance_delay_ms=get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=get_int("group.max.session.timeout.ms"),
            max_size=get_int("group.max.size"),
            offsets_partitions=get_int("offsets.topic.num.partitions"),
            offset_metadata_max_bytes=get_int("offset.metadata.max.bytes"),
        )


@dataclass(slots=True)
class Effects:
    """What an operation asks of the IO shell: append and replay ``records``
    (in order), then deliver ``replies`` (in order)."""

    records: list[CoordinatorRecord] = field(default_factory=list)
    replies: list[tuple[Token, Any]] = field(default_factory=list)

    def reply(self, token: Token, response: Any) -> Effects:
        self.replies.append((token, response))
        return self

    def extend(self, other: Effects) -> Effects:
        """Append ``other``'s records and replies after this one's."""
        self.records.extend(other.records)
        self.replies.extend(other.replies)
        return self

"""The records a KIP-848 consumer group writes to ``__consumer_offsets``, in
Kafka's format (key: int16 version then the key struct; value: int16 version 0
then the value struct, flexible):

===========  ==========================================  =====================================
key version  key (group[, member])                       value
===========  ==========================================  =====================================
3            ConsumerGroupMetadataKey                    ConsumerGroupMetadataValue (group epoch)
4            ConsumerGroupPartitionMetadataKey           ...PartitionMetadataValue (subscribed
                                                         topics: id, name, partition count)
5            ConsumerGroupMemberMetadataKey + member     ...MemberMetadataValue (subscription,
                                                         client, rebalance timeout, assignor)
6            ConsumerGroupTargetAssignmentMetadataKey    ...TargetAssignmentMetadataValue
                                                         (assignment epoch)
7            ConsumerGroupTargetAssignmentMemberKey      ...TargetAssignmentMemberValue
                                                         (the member's target partitions)
8            ConsumerGroupCurrentMemberAssignmentKey     ...CurrentMemberAssignmentValue
                                                         (epochs, state, assigned and
                                                         pending-revocation partitions)
===========  ==========================================  =====================================

A null value is a tombstone. A group's records are written in Kafka's order:
member records before the group epoch, the target's member records before the
assignment epoch, so a prefix of them replays to a consistent group.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, Final

from odradek.coordinator.consumer.model import Assignment, normalized
from odradek.wire.internal import (
    consumer_group_current_member_assignment_key as cak,
)
from odradek.wire.internal import (
    consumer_group_current_member_assignment_value as cav,
)
from odradek.wire.internal import consumer_group_member_metadata_key as mmk
from odradek.wire.internal import consumer_group_member_metadata_value as mmv
from odradek.wire.internal import consumer_group_metadata_key as gmk
from odradek.wire.internal import consumer_group_metadata_value as gmv
from odradek.wire.internal import consumer_group_partition_metadata_key as pmk
from odradek.wire.internal import consumer_group_partition_metadata_value as pmv
from odradek.wire.internal import consumer_group_target_assignment_member_key as tmk
from odradek.wire.internal import consumer_group_target_assignment_member_value as tmv
from odradek.wire.internal import consumer_group_target_assignment_metadata_key as tek
from odradek.wire.internal import consumer_group_target_assignment_metadata_value as tev
from odradek.wire.primitives import DecodeError

EPOCH: Final = 3
SUBSCRIPTION: Final = 4
MEMBER: Final = 5
TARGET_EPOCH: Final = 6
TARGET_MEMBER: Final = 7
CURRENT_ASSIGNMENT: Final = 8
KEY_VERSIONS: Final = frozenset(range(3, 9))

_VERSION: Final = struct.Struct(">h")

_KEYS: dict[int, Any] = {
    EPOCH: gmk.ConsumerGroupMetadataKey,
    SUBSCRIPTION: pmk.ConsumerGroupPartitionMetadataKey,
    MEMBER: mmk.ConsumerGroupMemberMetadataKey,
    TARGET_EPOCH: tek.ConsumerGroupTargetAssignmentMetadataKey,
    TARGET_MEMBER: tmk.ConsumerGroupTargetAssignmentMemberKey,
    CURRENT_ASSIGNMENT: cak.ConsumerGroupCurrentMemberAssignmentKey,
}
_VALUES: dict[int, Any] = {
    EPOCH: gmv.ConsumerGroupMetadataValue,
    SUBSCRIPTION: pmv.ConsumerGroupPartitionMetadataValue,
    MEMBER: mmv.ConsumerGroupMemberMetadataValue,
    TARGET_EPOCH: tev.ConsumerGroupTargetAssignmentMetadataValue,
    TARGET_MEMBER: tmv.ConsumerGroupTargetAssignmentMemberValue,
    CURRENT_ASSIGNMENT: cav.ConsumerGroupCurrentMemberAssignmentValue,
}
_PER_MEMBER: Final = frozenset((MEMBER, TARGET_MEMBER, CURRENT_ASSIGNMENT))


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One consumer-group record: ``kind`` is its key version; ``member`` is set
    for the per-member kinds; ``value`` is the generated value struct (None: a
    tombstone)."""

    kind: int
    group: str
    member: str | None
    value: Any

    @property
    def tombstone(self) -> bool:
        return self.value is None


def encode(record: ConsumerRecord) -> tuple[bytes, bytes | None]:
    key_type = _KEYS[record.kind]
    key_obj = (key_type(group_id=record.group, member_id=record.member)
               if record.kind in _PER_MEMBER else key_type(group_id=record.group))
    key = _VERSION.pack(record.kind) + key_obj.encode(record.kind)
    if record.value is None:
        return key, None
    return key, _VERSION.pack(0) + record.value.encode(0)


def decode(kind: int, key_body: memoryview, value: bytes | None) -> ConsumerRecord:
    k = _KEYS[kind].decode(key_body, kind)
    member = k.member_id if kind in _PER_MEMBER else None
    if value is None:
        return ConsumerRecord(kind, k.group_id, member, None)
    if len(value) < 2:
        raise DecodeError("consumer group record value shorter than its version")
    (version,) = _VERSION.unpack_from(value, 0)
    if version != 0:
        raise DecodeError(f"unknown consumer group record value version {version}")
    return ConsumerRecord(kind, k.group_id, member,
                          _VALUES[kind].decode(memoryview(value)[2:], 0))


# -- building values ------------------------------------------------------------------------


def topic_partitions(assignment: Assignment, cls: Any) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))]


def from_topic_partitions(items: list[Any]) -> Assignment:
    return normalized((i.topic_id, i.partitions) for i in items)


def epoch_record(group: str, epoch: int) -> ConsumerRecord:
    return ConsumerRecord(EPOCH, group, None, gmv.ConsumerGroupMetadataValue(epoch=epoch))


def target_epoch_record(group: str, epoch: int) -> ConsumerRecord:
    return ConsumerRecord(TARGET_EPOCH, group, None,
                          tev.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def subscription_record(group: str, topics: dict[str, tuple[uuid.UUID, int]]) -> ConsumerRecord:
    return ConsumerRecord(SUBSCRIPTION, group, None, pmv.ConsumerGroupPartitionMetadataValue(
        topics=[pmv.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n)
                for name, (tid, n) in sorted(topics.items())]))


def target_member_record(group: str, member: str, assignment: Assignment) -> ConsumerRecord:
    return ConsumerRecord(TARGET_MEMBER, group, member,
                          tmv.ConsumerGroupTargetAssignmentMemberValue(
                              topic_partitions=topic_partitions(assignment, tmv.TopicPartition)))


def tombstone(kind: int, group: str, member: str | None = None) -> ConsumerRecord:
    return ConsumerRecord(kind, group, member, None)


def group_tombstones(group: str) -> list[ConsumerRecord]:
    """What deletes an empty consumer group (its members' records are gone already)."""
    return [tombstone(TARGET_EPOCH, group), tombstone(SUBSCRIPTION, group),
            tombstone(EPOCH, group)]


MemberMetadataValue = mmv.ConsumerGroupMemberMetadataValue
ClassicMemberMetadata = mmv.ClassicMemberMetadata
ClassicProtocol = mmv.ClassicProtocol
CurrentAssignmentValue = cav.ConsumerGroupCurrentMemberAssignmentValue
CurrentTopicPartitions = cav.TopicPartitions

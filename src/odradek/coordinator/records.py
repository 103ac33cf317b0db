"""The records of ``__consumer_offsets``, in Kafka's own format.

Every record of the topic is a (key, value) pair; each side starts with a
big-endian int16 schema version followed by that version of a struct from
``../shared/kafka-protocol/internal/group-coordinator``:

====================  ===========  =========================================
key version           key struct   value struct (its own int16 version first)
====================  ===========  =========================================
0, 1                  OffsetCommitKey (group, topic, partition)
                                   OffsetCommitValue v3 (offset, leaderEpoch,
                                   metadata, commitTimestamp) — v1 when the
                                   commit carried an explicit expire time
2                     GroupMetadataKey (group)
                                   GroupMetadataValue v3 (protocolType,
                                   generation, protocol, leader,
                                   currentStateTimestamp, members)
3-8                   KIP-848 consumer groups
                                   (:mod:`odradek.coordinator.consumer.records`)
====================  ===========  =========================================

A null value is a tombstone: the offset (or the whole group) is deleted. The
last record for a key wins, so the cleaner may compact the topic. A group
lives in partition ``abs(javaHashCode(group_id)) % offsets.topic.num.partitions``,
as in Kafka, so a data directory is laid out the way Kafka lays it out.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Final

from odradek.coordinator.consumer import records as consumer_records
from odradek.coordinator.consumer.records import ConsumerRecord
from odradek.wire.internal.group_metadata_key import GroupMetadataKey
from odradek.wire.internal.group_metadata_value import GroupMetadataValue
from odradek.wire.internal.offset_commit_key import OffsetCommitKey
from odradek.wire.internal.offset_commit_value import OffsetCommitValue
from odradek.wire.primitives import DecodeError

_VERSION: Final = struct.Struct(">h")
OFFSET_KEY_VERSION: Final = 1
GROUP_KEY_VERSION: Final = 2
OFFSET_VALUE_VERSION: Final = 3
GROUP_VALUE_VERSION: Final = 3

OFFSETS_TOPIC: Final = "__consumer_offsets"

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_TWO_I64: Final = struct.Struct(">qq")
_KEY_HEAD: Final = struct.Struct(">hh")  # key version, group length
_V1_HEAD: Final = struct.Struct(">hqh")  # value version 1, offset, metadata length
_V3_HEAD: Final = struct.Struct(">hqih")  # value version 3, offset, leader epoch, metadata length


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` of Java: over UTF-16 code units, int32 overflow."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``Utils.abs``)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """A committed offset (``value`` None: deleted)."""

    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's metadata as of its last completed generation (None: deleted)."""

    group: str
    value: GroupMetadataValue | None


CoordinatorRecord = OffsetRecord | GroupRecord | ConsumerRecord


def encode(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of ``record``."""
    if isinstance(record, ConsumerRecord):
        return consumer_records.encode(record)
    if isinstance(record, OffsetRecord):
        # Packed by hand: one commit writes a record per partition, and these
        # fixed layouts (checked against the generated codec in the tests) cost
        # a fraction of the generic encoder.
        group, topic = record.group.encode(), record.topic.encode()
        key = b"".join((
            _KEY_HEAD.pack(OFFSET_KEY_VERSION, len(group)), group,
            _I16.pack(len(topic)), topic, _I32.pack(record.partition),
        ))
        v = record.value
        if v is None:
            return key, None
        meta = v.metadata.encode()
        if v.expire_timestamp >= 0:
            value = b"".join((_V1_HEAD.pack(1, v.offset, len(meta)), meta,
                              _TWO_I64.pack(v.commit_timestamp, v.expire_timestamp)))
        else:
            value = b"".join((_V3_HEAD.pack(OFFSET_VALUE_VERSION, v.offset, v.leader_epoch,
                                            len(meta)), meta, _I64.pack(v.commit_timestamp)))
        return key, value
    key = _VERSION.pack(GROUP_KEY_VERSION) + GroupMetadataKey(group=record.group).encode(
        GROUP_KEY_VERSION
    )
    if record.value is None:
        return key, None
    return key, _VERSION.pack(GROUP_VALUE_VERSION) + record.value.encode(GROUP_VALUE_VERSION)


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord | None:
    """The record of a (key, value) pair; None for key versions this broker
    does not use (share groups, regular expressions of Kafka 4)."""
    if len(key) < 2:
        raise DecodeError("coordinator record key shorter than its version")
    (kver,) = _VERSION.unpack_from(key, 0)
    body = memoryview(key)[2:]
    if kver in (0, 1):
        k = OffsetCommitKey.decode(body, kver)
        v = None if value is None else OffsetCommitValue.decode(*_versioned(value, 0, 4))
        return OffsetRecord(k.group, k.topic, k.partition, v)
    if kver in consumer_records.KEY_VERSIONS:
        return consumer_records.decode(kver, body, value)
    if kver == GROUP_KEY_VERSION:
        g = GroupMetadataKey.decode(body, kver)
        gv = None if value is None else GroupMetadataValue.decode(*_versioned(value, 0, 4))
        return GroupRecord(g.group, gv)
    return None


def _versioned(value: bytes, low: int, high: int) -> tuple[memoryview, int]:
    if len(value) < 2:
        raise DecodeError("coordinator record value shorter than its version")
    (version,) = _VERSION.unpack_from(value, 0)
    if not low <= version <= high:
        raise DecodeError(f"unknown coordinator record value version {version}")
    return memoryview(value)[2:], version

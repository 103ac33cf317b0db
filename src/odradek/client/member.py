"""A consumer group member of the KIP-848 protocol (ConsumerGroupHeartbeat).

What ``odradek consume --group`` uses to share a topic's partitions with the
group's other members, as a Kafka 4 consumer with ``group.protocol=consumer``
does: the coordinator computes the assignment, so the member runs no assignor.

The member's life: a heartbeat with member epoch 0 joins (version 1 and later:
the member names itself with a client-made UUID; version 0: the coordinator
names it); each answer may carry the member's new target assignment and epoch;
the member gives up the partitions it lost (after committing their offsets),
takes the new ones, and says what it owns in its next heartbeat, which the
coordinator waits for before handing a revoked partition to another member.
Member epoch -1 leaves. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID means the
coordinator dropped the member: it rejoins with epoch 0 and owns nothing.

Offsets are committed with OffsetCommit version 9, the member id and its
epoch, as the consumer protocol asks.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, KafkaError, check
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

HEARTBEAT_API = 68
REBALANCE_TIMEOUT_MS = 30_000
LEAVE_EPOCH = -1
REJOIN = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


@dataclass
class Heartbeat:
    """What one heartbeat answered: the partitions of the topic now assigned
    (None: unchanged) and when to send the next heartbeat."""

    assigned: set[int] | None
    interval_ms: int
    fenced: bool = False
    """The coordinator had dropped the member: what it owned is no longer its
    own (its offsets must not be committed); it has joined again."""


@dataclass
class GroupMember:
    """One member of ``group`` subscribed to ``topic`` (whose id is ``topic_id``)."""

    client: KafkaClient
    group: str
    topic: str
    topic_id: uuid.UUID
    member_id: str = ""
    epoch: int = 0
    owned: set[int] = field(default_factory=set)

    async def heartbeat(self) -> Heartbeat:
        """One heartbeat saying what the member owns. Raises KafkaError for an
        error it cannot ride out (a coordinator that moved is found again; a
        fenced member rejoins, owning nothing: the answer then assigns afresh)."""
        conn = await self.client.coordinator(self.group)
        version = conn.version_for(HEARTBEAT_API, 1, 0)
        if version >= 1 and not self.member_id:
            self.member_id = str(uuid.uuid4())
        resp = await conn.request(ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, subscribed_topic_names=[self.topic],
            topic_partitions=[TopicPartitions(topic_id=self.topic_id,
                                              partitions=sorted(self.owned))],
        ), version, version)
        if resp.error_code in REJOIN:
            self.epoch, self.owned = 0, set()
            return Heartbeat(set(), 0, fenced=True)
        if resp.error_code in COORDINATOR_MOVED:
            return Heartbeat(None, 200)
        check(resp.error_code, resp.error_message or f"group {self.group!r}")
        if resp.member_id:
            self.member_id = resp.member_id
        self.epoch = resp.member_epoch
        assigned = None
        if resp.assignment is not None:
            assigned = {p for tp in resp.assignment.topic_partitions
                        if tp.topic_id == self.topic_id for p in tp.partitions}
        return Heartbeat(assigned, resp.heartbeat_interval_ms)

    async def commit(self, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` (partition -> next offset) as this member."""
        if not offsets:
            return
        conn = await self.client.coordinator(self.group)
        resp = await conn.request(OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.epoch,
            member_id=self.member_id,
            topics=[OffsetCommitRequestTopic(name=self.topic, partitions=[
                OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                             committed_metadata="")
                for p, o in sorted(offsets.items())])],
        ), 9, 9)
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code,
                      f"commit of {self.topic}-{p.partition_index} for group {self.group!r}")

    async def leave(self) -> None:
        """Leave the group (member epoch -1); errors are ignored: the coordinator
        drops a silent member at its session timeout anyway."""
        if not self.member_id:
            return
        try:
            conn = await self.client.coordinator(self.group)
            version = conn.version_for(HEARTBEAT_API, 1, 0)
            await conn.request(ConsumerGroupHeartbeatRequest(
                group_id=self.group, member_id=self.member_id, member_epoch=LEAVE_EPOCH),
                version, version)
        except (KafkaError, ClientError, OSError):
            pass

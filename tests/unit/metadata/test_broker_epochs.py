"""Broker epochs as Kafka's KRaft controller assigns them: the offset of the
broker's RegisterBrokerRecord in the metadata log, the same on every node that
replays the log or a snapshot of it, and checked by fencing and AlterPartition."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.metadata import controller
from odradek.metadata import partition_changes as pc
from odradek.metadata.image import FENCE, UNFENCE, Endpoint, MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from odradek.wire.internal.register_broker_record import RegisterBrokerRecord


class Log:
    """A metadata log: a controller decides on its image at the log's end and
    appends; each record takes the next offset (as in ``__cluster_metadata``,
    where control entries take offsets too: :meth:`control` skips some)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, Any]] = []
        self.end = 0
        self.image = MetadataImage()

    def control(self, count: int) -> None:
        """A LeaderChange or voters entry: offsets that no metadata record takes."""
        self.end += count

    def write(self, outcome: Outcome) -> Outcome:
        assert outcome.error == ErrorCode.NONE, outcome.message
        for record in outcome.records:
            self.records.append((self.end, record))
            self.end += 1
            self.image.replay(record)
        return outcome

    def register(self, node_id: int, incarnation: int, **kwargs: Any) -> Outcome:
        return self.write(controller.register_broker(
            self.image, node_id, [Endpoint("PLAINTEXT", "h", 9000 + node_id)],
            uuid.UUID(int=incarnation), fence_previous=True, at_offset=self.end, **kwargs))

    def registration_offsets(self, node_id: int) -> list[int]:
        return [offset for offset, r in self.records
                if isinstance(r, RegisterBrokerRecord) and r.broker_id == node_id]


def test_the_broker_epoch_is_the_offset_of_the_register_broker_record() -> None:
    log = Log()
    log.control(1)  # the first leader's LeaderChange entry at offset 0
    log.register(1, 1)
    log.register(2, 2)
    log.control(3)
    log.register(3, 3)
    for node_id in (1, 2, 3):
        (offset,) = log.registration_offsets(node_id)
        assert log.image.brokers[node_id].epoch == offset
    assert [log.image.brokers[n].epoch for n in (1, 2, 3)] == [1, 3, 8]


def test_a_restarted_broker_gets_the_offset_of_its_new_registration_a_larger_epoch() -> None:
    log = Log()
    log.register(1, 1)
    log.register(2, 2)
    first = log.image.brokers[1].epoch
    # A new incarnation of a live broker: the old one is fenced first, so the
    # registration is not the outcome's first record.
    outcome = log.register(1, 10)
    assert isinstance(outcome.records[0], BrokerRegistrationChangeRecord)
    assert outcome.records[0].broker_epoch == first  # fences the old incarnation
    second = log.image.brokers[1].epoch
    assert second == log.registration_offsets(1)[-1] > first
    unfence = [r for r in outcome.records if isinstance(r, BrokerRegistrationChangeRecord)
               and r.fenced == UNFENCE]
    assert [r.broker_epoch for r in unfence] == [second]
    assert not log.image.brokers[1].fenced


def test_a_stale_epoch_is_refused_and_changes_for_it_are_ignored() -> None:
    log = Log()
    log.register(1, 1)
    old = log.image.brokers[1].epoch
    log.register(1, 2)
    new = log.image.brokers[1].epoch
    assert pc.check_broker_epoch(log.image, 1, old).error == ErrorCode.STALE_BROKER_EPOCH
    assert pc.check_broker_epoch(log.image, 1, new).error == ErrorCode.NONE
    # A fencing record of the old incarnation does not fence the new one.
    log.image.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=old,
                                                    fenced=FENCE))
    assert not log.image.brokers[1].fenced
    fenced = log.write(controller.fence_broker(log.image, 1))
    assert fenced.records[0].broker_epoch == new and log.image.brokers[1].fenced


def test_alter_partition_checks_the_sender_and_members_against_the_offset_epochs() -> None:
    log = Log()
    log.control(1)
    for n in (1, 2):
        log.register(n, n)
    log.write(controller.create_topic(log.image, "t", 1, 2, {}, node_id=1,
                                      default_partitions=1, topic_id=uuid.UUID(int=99),
                                      assignments=[[1, 2]]))
    p = log.image.topics["t"].partitions[0]
    epoch1, epoch2 = log.image.brokers[1].epoch, log.image.brokers[2].epoch
    shrink, _ = pc.alter_partition(log.image, 1, epoch1, "t", 0, p.leader_epoch,
                                   p.partition_epoch, [1])
    log.write(shrink)
    p = log.image.topics["t"].partitions[0]
    stale, _ = pc.alter_partition(log.image, 1, epoch1 - 1, "t", 0, p.leader_epoch,
                                  p.partition_epoch, [1, 2])
    assert stale.error == ErrorCode.STALE_BROKER_EPOCH
    wrong_member, _ = pc.alter_partition(log.image, 1, epoch1, "t", 0, p.leader_epoch,
                                         p.partition_epoch, [1, 2], {2: epoch2 + 1})
    assert wrong_member.error == ErrorCode.INELIGIBLE_REPLICA
    expand, _ = pc.alter_partition(log.image, 1, epoch1, "t", 0, p.leader_epoch,
                                   p.partition_epoch, [1, 2], {2: epoch2})
    assert expand.error == ErrorCode.NONE


def test_every_node_replaying_the_log_or_a_snapshot_agrees_on_the_epochs() -> None:
    log = Log()
    log.control(2)
    log.register(1, 1)
    log.register(2, 2)
    log.register(1, 3)
    replayed = MetadataImage()
    for _, record in log.records:
        replayed.replay(record)
    restored = MetadataImage()
    for record in log.image.to_records():
        restored.replay(record)
    want = {n: (b.epoch, b.fenced) for n, b in log.image.brokers.items()}
    assert {n: (b.epoch, b.fenced) for n, b in replayed.brokers.items()} == want
    assert {n: (b.epoch, b.fenced) for n, b in restored.brokers.items()} == want
    assert want[1][0] == log.registration_offsets(1)[-1]


def test_without_a_log_offset_the_epoch_still_grows() -> None:
    image = MetadataImage()
    for incarnation in (1, 2):
        outcome = controller.register_broker(image, 1, [Endpoint("PLAINTEXT", "h", 1)],
                                             uuid.UUID(int=incarnation))
        for record in outcome.records:
            image.replay(record)
    assert image.brokers[1].epoch == 1

"""Broker registrations in the metadata image, and ids from an injected source."""

from __future__ import annotations

from odradek.common.ids import SeededIds
from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from odradek.wire.internal.fence_broker_record import FenceBrokerRecord
from odradek.wire.internal.unregister_broker_record import UnregisterBrokerRecord


def _apply(image: MetadataImage, outcome: controller.Outcome) -> None:
    assert outcome.error == ErrorCode.NONE, outcome.message
    for record in outcome.records:
        image.replay(record)


def test_a_registered_broker_is_live_with_its_endpoints() -> None:
    image = MetadataImage()
    ids = SeededIds(1)
    endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("INTERNAL", "10.0.0.1", 9093)]
    _apply(image, controller.register_broker(image, 1, endpoints, ids.uuid()))
    broker = image.brokers[1]
    assert broker.fenced is False
    assert broker.endpoints == endpoints
    assert broker.endpoint("INTERNAL") == endpoints[1]
    assert broker.endpoint() == endpoints[0]
    assert image.live_brokers() == 1


def test_a_new_registration_replaces_the_old_one_with_a_higher_epoch() -> None:
    image = MetadataImage()
    ids = SeededIds(2)
    _apply(image, controller.register_broker(
        image, 1, [Endpoint("PLAINTEXT", "127.0.0.1", 1111)], ids.uuid()))
    first = image.brokers[1].epoch
    _apply(image, controller.register_broker(
        image, 1, [Endpoint("PLAINTEXT", "127.0.0.1", 2222)], ids.uuid()))
    assert image.brokers[1].epoch > first
    assert [e.port for e in image.brokers[1].endpoints] == [2222]
    assert image.live_brokers() == 1


def test_the_same_incarnation_cannot_register_twice() -> None:
    image = MetadataImage()
    incarnation = SeededIds(3).uuid()
    endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 1)]
    _apply(image, controller.register_broker(image, 1, endpoints, incarnation))
    again = controller.register_broker(image, 1, endpoints, incarnation)
    assert again.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert again.records == []


def test_fencing_applies_only_to_the_current_epoch_and_unregister_removes() -> None:
    image = MetadataImage()
    ids = SeededIds(4)
    _apply(image, controller.register_broker(
        image, 1, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid()))
    _apply(image, controller.register_broker(
        image, 2, [Endpoint("PLAINTEXT", "h", 2)], ids.uuid()))
    epoch = image.brokers[2].epoch
    image.replay(FenceBrokerRecord(id=2, epoch=epoch - 1))  # a stale epoch: ignored
    assert image.live_brokers() == 2
    image.replay(FenceBrokerRecord(id=2, epoch=epoch))
    assert image.brokers[2].fenced and image.live_brokers() == 1
    image.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=image.brokers[1].epoch))
    assert list(image.brokers) == [2] and image.live_brokers() == 0


def test_the_controller_fences_and_unfences_with_registration_change_records() -> None:
    """Kafka's controller writes BrokerRegistrationChangeRecord (Fenced 1 / -1) for
    both since metadata version 3.3; older logs' Fence/UnfenceBrokerRecords still
    replay (above)."""
    image = MetadataImage()
    ids = SeededIds(6)
    registered = controller.register_broker(image, 1, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid())
    changes = [r for r in registered.records if isinstance(r, BrokerRegistrationChangeRecord)]
    assert [(c.broker_id, c.fenced) for c in changes] == [(1, -1)]
    _apply(image, registered)
    epoch = image.brokers[1].epoch
    assert changes[0].broker_epoch == epoch and not image.brokers[1].fenced
    fenced = controller.fence_broker(image, 1)
    assert isinstance(fenced.records[0], BrokerRegistrationChangeRecord)
    assert (fenced.records[0].fenced, fenced.records[0].broker_epoch) == (1, epoch)
    _apply(image, fenced)
    assert image.brokers[1].fenced
    image.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch - 1, fenced=-1))
    assert image.brokers[1].fenced  # a stale epoch: ignored
    _apply(image, controller.unfence_broker(image, 1))
    assert not image.brokers[1].fenced
    image.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=0))
    assert not image.brokers[1].fenced  # 0: no change


def test_replication_factor_is_bounded_by_live_brokers() -> None:
    image = MetadataImage()
    ids = SeededIds(5)
    for node in (1, 2):
        _apply(image, controller.register_broker(
            image, node, [Endpoint("PLAINTEXT", "h", node)], ids.uuid()))
    ok = controller.create_topic(image, "t", 1, 1, {}, node_id=1, default_partitions=1,
                                 topic_id=ids.uuid())
    assert ok.error == ErrorCode.NONE
    both = controller.create_topic(image, "v", 1, 2, {}, node_id=1,
                                   default_partitions=1, topic_id=ids.uuid())
    assert both.error == ErrorCode.NONE  # two brokers hold two replicas
    too_many = controller.create_topic(image, "u", 1, 3, {}, node_id=1, default_partitions=1,
                                       topic_id=ids.uuid())
    assert too_many.error == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 2 broker(s)" in (too_many.message or "")


def test_seeded_ids_repeat_per_seed_and_differ_across_seeds() -> None:
    a, b, c = SeededIds(9), SeededIds(9), SeededIds(10)
    first = [a.uuid() for _ in range(5)]
    assert first == [b.uuid() for _ in range(5)]
    assert first != [c.uuid() for _ in range(5)]
    assert len(set(first)) == 5
    assert all(u.version == 4 for u in first)

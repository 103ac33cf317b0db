"""MetadataImage.to_records: replaying them into an empty image rebuilds the image
(what a metadata snapshot relies on)."""

from __future__ import annotations

from typing import Any

from odradek.common.ids import SeededIds
from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.wire.internal.client_quota_record import ClientQuotaRecord, EntityData
from odradek.wire.internal.config_record import ConfigRecord


def _apply(image: MetadataImage, records: list[Any]) -> None:
    for r in records:
        image.replay(r)


def test_replaying_the_records_of_an_image_rebuilds_it() -> None:
    ids = SeededIds(3)
    image = MetadataImage()
    for node in (1, 2, 3):
        _apply(image, controller.register_broker(
            image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)], ids.uuid(),
            rack=f"r{node % 2}").records)
    for name, parts in (("a", 3), ("b", 5)):
        _apply(image, controller.create_topic(
            image, name, parts, 1, {"cleanup.policy": "compact"} if name == "a" else {},
            node_id=1, default_partitions=1, topic_id=ids.uuid()).records)
    _apply(image, controller.fence_broker(image, 2).records)  # leaders move or go -1
    _apply(image, controller.delete_topic(image, "b").records)
    _apply(image, [ConfigRecord(4, "", "log.retention.ms", "1000")])
    _apply(image, [ClientQuotaRecord([EntityData("client-id", "app")], "producer_byte_rate",
                                     1024.0)])
    _apply(image, controller.allocate_producer_ids(image, 1)[1].records)
    _apply(image, controller.finalize_features(image).records)
    assert controller.finalize_features(image).records == []  # once only
    copy = MetadataImage()
    _apply(copy, image.to_records())
    copy.derived.clear()
    image.derived.clear()
    assert copy == image
    assert copy.brokers[2].fenced and not copy.brokers[1].fenced
    assert copy.next_producer_id == 1000
    assert copy.features == {"metadata.version": controller.METADATA_VERSION_LEVEL,
                             "group.version": 1, "transaction.version": 2}


def test_replicas_are_striped_over_live_brokers_alternating_racks() -> None:
    import uuid

    ids = SeededIds(4)
    image = MetadataImage()
    for node, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        _apply(image, controller.register_broker(
            image, node, [Endpoint("PLAINTEXT", "h", node)], ids.uuid(), rack=rack).records)
    placed = controller.place_replicas(image, uuid.UUID(int=0), range(8), 2, node_id=1)
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all(racks[r[0]] != racks[r[1]] for r in placed)  # two racks per partition
    leaders = [r[0] for r in placed]
    assert sorted(set(leaders)) == [1, 2, 3, 4] and leaders.count(1) == 2  # spread evenly
    _apply(image, controller.fence_broker(image, 3).records)
    placed = controller.place_replicas(image, uuid.UUID(int=0), range(6), 1, node_id=1)
    assert 3 not in {r[0] for r in placed}  # never on a fenced broker

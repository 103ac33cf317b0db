"""MetadataImage.replayed: a look-ahead copy that leaves the image as it was and
shares what the records do not change (register_broker's fencing on a large
cluster deep-copied every partition on the controller's loop)."""

from __future__ import annotations

import copy
import uuid

from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.wire.internal.config_record import ConfigRecord


def cluster(topics: int = 4) -> MetadataImage:
    """Three unfenced brokers and ``topics`` topics of 3 partitions, RF 2."""
    image = MetadataImage()
    for node in (1, 2, 3):
        for record in controller.register_broker(
                image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)],
                uuid.UUID(int=node), at_offset=node).records:
            image.replay(record)
    for t in range(topics):
        for record in controller.create_topic(
                image, f"t{t}", 3, 2, {}, node_id=1, default_partitions=1,
                topic_id=uuid.UUID(int=100 + t)).records:
            image.replay(record)
    return image


def test_a_fencing_look_ahead_equals_a_deep_copy_and_leaves_the_image_alone() -> None:
    image = cluster()
    before = copy.deepcopy(image)
    records = controller.fence_broker(image, 1).records
    assert len(records) > 1  # the fencing and partition changes
    expected = copy.deepcopy(image)
    for record in records:
        expected.replay(record)
    after = image.replayed(records)
    assert after == expected
    assert image == before


def test_what_the_records_leave_alone_is_shared() -> None:
    image = cluster()
    records = controller.fence_broker(image, 1).records
    after = image.replayed(records)
    touched = {image.by_id[r.topic_id] for r in records if hasattr(r, "topic_id")}
    for name, topic in image.topics.items():
        assert (after.topics[name] is topic) == (name not in touched)
    assert after.brokers[2] is image.brokers[2]
    assert after.brokers[1] is not image.brokers[1] and image.brokers[1].fenced is False


def test_any_other_record_makes_a_deep_copy() -> None:
    image = cluster(1)
    after = image.replayed([ConfigRecord(2, "t0", "retention.ms", "5")])
    assert after.topics["t0"].configs == {"retention.ms": "5"}
    assert image.topics["t0"].configs == {}
    assert after.topics["t0"] is not image.topics["t0"]


def test_a_restarted_broker_still_unfenced_is_fenced_then_registered() -> None:
    image = cluster()
    outcome = controller.register_broker(
        image, 1, [Endpoint("PLAINTEXT", "h", 9001)], uuid.UUID(int=99),
        fence_previous=True, at_offset=50)
    kinds = [type(r).__name__ for r in outcome.records]
    assert kinds[0] == "BrokerRegistrationChangeRecord" and "RegisterBrokerRecord" in kinds
    assert image.brokers[1].incarnation_id == uuid.UUID(int=1)  # the image is unchanged

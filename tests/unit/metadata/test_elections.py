"""Which controller decisions count as leader elections, and which of them are
unclean (:func:`odradek.metadata.elections.count_elections`), on decisions the
controller really makes: each counted on the image it was decided on, before
its records are replayed, as the controller queue counts them."""

from __future__ import annotations

from typing import Any

from odradek.metadata import controller
from odradek.metadata.elections import count_elections
from odradek.metadata.image import MetadataImage
from odradek.wire.internal.partition_change_record import PartitionChangeRecord
from tests.unit.metadata.test_replication_decisions import (
    UNCLEAN,
    _alter,
    _apply,
    _cluster,
    _topic,
)


def _counted(image: MetadataImage, outcome: controller.Outcome) -> tuple[int, int]:
    counted = count_elections(image, outcome.records)
    _apply(image, outcome)
    return counted


def test_a_new_topic_assigns_leaders_and_elects_none() -> None:
    image, ids = _cluster(3)
    outcome = controller.create_topic(image, "t", 3, 3, {}, node_id=1, default_partitions=1,
                                      topic_id=ids.uuid())
    assert _counted(image, outcome) == (0, 0)


def test_a_fenced_leader_hands_over_in_a_clean_election_per_partition() -> None:
    image, ids = _cluster(3)
    _topic(image, ids, rf=3, partitions=3)
    led = [p for p in image.topics["t"].partitions.values() if p.leader == 1]
    assert led
    assert _counted(image, controller.fence_broker(image, 1)) == (len(led), 0)
    assert all(p.leader not in (1, -1) for p in led)


def test_a_fenced_follower_shrinks_isrs_and_elects_nothing() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids, rf=3)
    follower = p.replicas[2]
    assert _counted(image, controller.fence_broker(image, follower)) == (0, 0)
    assert follower not in p.isr


def test_a_leader_from_outside_the_isr_is_an_unclean_election() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids, configs={UNCLEAN: "true"})
    first = p.leader
    _apply(image, _alter(image, p, [first])[0])
    assert _counted(image, controller.fence_broker(image, first)) == (1, 1)
    assert p.leader != first and p.isr == [p.leader]


def test_a_partition_going_leaderless_or_keeping_its_leader_is_no_election() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    _apply(image, controller.fence_broker(image, third))
    _apply(image, controller.fence_broker(image, second))
    assert _counted(image, controller.fence_broker(image, first)) == (0, 0)  # leader -1
    assert p.leader == -1
    # Its last ISR member back: it leads again, a clean election.
    assert _counted(image, controller.unfence_broker(image, first)) == (1, 0)
    same: list[Any] = [PartitionChangeRecord(partition_id=0, topic_id=image.topics["t"].topic_id,
                                             leader=first)]
    assert count_elections(image, same) == (0, 0)
    unknown: list[Any] = [PartitionChangeRecord(partition_id=7, topic_id=ids.uuid(), leader=1)]
    assert count_elections(image, unknown) == (0, 0)


def test_elections_one_per_partition_are_not_atomic_and_topic_creation_is() -> None:
    """Fencing, unfencing and preferred elections may be committed in several
    entries (each record stands alone); a topic's records all or none."""
    image, ids = _cluster(3)
    created = controller.create_topic(image, "t", 6, 3, {}, node_id=1, default_partitions=1,
                                      topic_id=ids.uuid())
    assert created.atomic
    _apply(image, created)
    fenced = controller.fence_broker(image, 1)
    assert fenced.records and not fenced.atomic
    _apply(image, fenced)
    unfenced = controller.unfence_broker(image, 1)
    assert unfenced.records and not unfenced.atomic


def test_a_new_controller_elects_the_leaders_an_unfencing_it_lost_part_way_left_out() -> None:
    """An unfencing committed in several entries whose later ones a leadership
    change lost: the broker is live, its partitions have no leader. The next
    active controller elects them; on an image where every partition that can
    have a leader has one, it decides nothing."""
    image, ids = _cluster(3)
    _topic(image, ids, rf=1, partitions=9)
    assert controller.elect_leaderless(image).records == []
    mine = [p for p in image.topics["t"].partitions.values() if p.replicas == [2]]
    assert mine
    _apply(image, controller.fence_broker(image, 2))
    assert all(p.leader == -1 for p in mine)
    unfenced = controller.unfence_broker(image, 2)
    first_entry = controller.Outcome(records=unfenced.records[:1])  # the registration change
    _apply(image, first_entry)
    assert all(p.leader == -1 for p in mine)  # live, yet leading nothing

    elected = controller.elect_leaderless(image)
    assert not elected.atomic
    _apply(image, elected)
    assert all(p.leader == 2 for p in mine)
    assert controller.elect_leaderless(image).records == []


def test_a_new_controller_elects_no_leader_from_a_dead_isr() -> None:
    image, ids = _cluster(3)
    _topic(image, ids, rf=1, partitions=9)
    _apply(image, controller.fence_broker(image, 2))
    assert controller.elect_leaderless(image).records == []  # unclean election is off

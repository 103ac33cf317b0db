"""Replicas that lost their log (KIP-858 directories, odradek.metadata.directories):
a broker that registers without the directory a replica lived in is taken out
of that partition's ISR, even as its last member, and is never elected while
another replica of the partition still has a log. Images are built with the
controller's own records, replayed."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from odradek.common.ids import SeededIds
from odradek.metadata import controller, directories, partition_changes
from odradek.metadata.image import BROKER_RESOURCE, Endpoint, MetadataImage, PartitionImage
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.config_record import ConfigRecord

DIRS = {n: uuid.UUID(int=1000 + n) for n in (1, 2, 3)}


def _apply(image: MetadataImage, outcome: controller.Outcome) -> list[Any]:
    assert outcome.error == ErrorCode.NONE, outcome.message
    for record in outcome.records:
        image.replay(record)
    return outcome.records


def _register(image: MetadataImage, ids: SeededIds, node: int, log_dir: uuid.UUID) -> list[Any]:
    return _apply(image, controller.register_broker(
        image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)], ids.uuid(),
        fence_previous=True, log_dirs=[log_dir]))


def _cluster() -> tuple[MetadataImage, SeededIds]:
    image, ids = MetadataImage(), SeededIds(7)
    for node, log_dir in DIRS.items():
        _register(image, ids, node, log_dir)
    return image, ids


def _topic(image: MetadataImage, ids: SeededIds, rf: int = 3,
           configs: dict[str, str | None] | None = None) -> PartitionImage:
    _apply(image, controller.create_topic(image, "t", 1, rf, configs or {}, node_id=1,
                                          default_partitions=1, topic_id=ids.uuid()))
    return image.topics["t"].partitions[0]


def _fence(image: MetadataImage, node: int) -> None:
    _apply(image, controller.fence_broker(image, node))


def test_new_replicas_live_in_their_brokers_directory() -> None:
    image, ids = _cluster()
    p = _topic(image, ids)
    assert p.directories == [DIRS[r] for r in p.replicas]
    assert image.brokers[1].log_dirs == [DIRS[1]]


def test_a_broker_back_with_a_wiped_disk_leaves_the_isr_and_its_partition_moves_on() -> None:
    image, ids = _cluster()
    p = _topic(image, ids)
    wiped = p.leader
    _register(image, ids, wiped, uuid.UUID(int=99))  # restarted within its session
    assert wiped not in p.isr and len(p.isr) == 2
    assert p.leader in p.isr and p.leader != wiped
    assert directories.lost_replicas(p) == {wiped}


def test_the_last_isr_member_with_a_wiped_disk_is_not_elected_back() -> None:
    """ISR shrank to [V]; V dies; V comes back with a formatted disk while the
    others (out of the ISR) hold the data: the partition stays without a leader
    (unclean election off) instead of taking V's empty log as the truth."""
    image, ids = _cluster()
    p = _topic(image, ids)
    v = p.leader
    others = [r for r in p.replicas if r != v]
    _apply(image, controller.alter_partition(image, v, image.brokers[v].epoch, "t", 0,
                                             p.leader_epoch, p.partition_epoch, [v])[0])
    _fence(image, v)
    assert p.leader == -1 and p.isr == [v]
    before = copy.deepcopy(image)
    _register(image, ids, v, uuid.UUID(int=98))
    assert p.leader == -1 and p.isr == []
    assert directories.lost_replicas(p) == {v}
    # Every other broker live: still no leader, and an unclean election takes a
    # replica that was not wiped, never V.
    assert set(others) <= partition_changes.live_brokers(image)
    results, outcome = partition_changes.elect_leaders(image, partition_changes.UNCLEAN,
                                                       [("t", 0)])
    assert results[("t", 0)][0] == ErrorCode.NONE
    _apply(image, outcome)
    assert p.leader == others[0] and p.isr == [others[0]]
    # Without the directory change (a plain restart) V would have led again.
    _register(before, ids, v, DIRS[v])
    assert before.topics["t"].partitions[0].leader == v


def test_with_unclean_election_on_a_replica_with_data_leads_not_the_wiped_one() -> None:
    image, ids = _cluster()
    p = _topic(image, ids, configs={"unclean.leader.election.enable": "true"})
    v = p.leader
    _apply(image, controller.alter_partition(image, v, image.brokers[v].epoch, "t", 0,
                                             p.leader_epoch, p.partition_epoch, [v])[0])
    _fence(image, v)
    _register(image, ids, v, uuid.UUID(int=97))
    assert p.leader not in (-1, v) and p.isr == [p.leader]


def test_a_lost_replica_rejoins_the_isr_once_caught_up_and_is_at_home_again() -> None:
    image, ids = _cluster()
    p = _topic(image, ids)
    v = next(r for r in p.replicas if r != p.leader)
    new_dir = uuid.UUID(int=96)
    _register(image, ids, v, new_dir)
    assert v not in p.isr and directories.lost_replicas(p) == {v}
    leader = p.leader
    outcome, state = controller.alter_partition(
        image, leader, image.brokers[leader].epoch, "t", 0, p.leader_epoch,
        p.partition_epoch, [*p.isr, v])
    _apply(image, outcome)
    assert state is not None and v in p.isr
    assert directories.directory_map(p)[v] == new_dir
    assert directories.lost_replicas(p) == set()


def test_a_single_replica_with_a_wiped_disk_leads_again_as_kafka_does() -> None:
    """RF=1: no other copy exists, so keeping the partition offline saves
    nothing; its broker leads again, with an empty log."""
    image, ids = _cluster()
    p = _topic(image, ids, rf=1)
    v = p.leader
    _fence(image, v)
    _register(image, ids, v, uuid.UUID(int=95))
    assert p.leader == v and p.isr == [v]
    assert directories.lost_replicas(p) == set()


def test_a_broker_registering_without_directories_changes_nothing() -> None:
    """An older broker (BrokerRegistration v0-1) names no directory: nothing is
    taken as lost."""
    image, ids = _cluster()
    p = _topic(image, ids)
    v = p.leader
    _apply(image, controller.register_broker(
        image, v, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid(), fence_previous=True))
    assert directories.lost_replicas(p) == set()


def test_directories_survive_a_snapshot() -> None:
    image, ids = _cluster()
    p = _topic(image, ids)
    _register(image, ids, p.replicas[1], uuid.UUID(int=94))
    image.replay(ConfigRecord(BROKER_RESOURCE, "", "x", "y"))
    copy_ = MetadataImage()
    for record in image.to_records():
        copy_.replay(record)
    q = copy_.topics["t"].partitions[0]
    assert q.directories == p.directories and q.isr == p.isr
    assert copy_.brokers[p.replicas[1]].log_dirs == [uuid.UUID(int=94)]

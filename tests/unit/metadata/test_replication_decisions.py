"""The controller's decisions for replicated partitions: replication factors above
one, AlterPartition, failover on fencing, leaders coming back, ElectLeaders and
reassignments. Images are built with the controller's own records, replayed."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from odradek.common.ids import SeededIds
from odradek.metadata import controller, partition_changes
from odradek.metadata.image import (
    BROKER_RESOURCE,
    Endpoint,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.config_record import ConfigRecord
from odradek.wire.internal.fence_broker_record import FenceBrokerRecord
from odradek.wire.internal.partition_change_record import PartitionChangeRecord
from odradek.wire.internal.unregister_broker_record import UnregisterBrokerRecord

UNCLEAN = "unclean.leader.election.enable"


def _apply(image: MetadataImage, outcome: controller.Outcome) -> list[Any]:
    assert outcome.error == ErrorCode.NONE, outcome.message
    for record in outcome.records:
        image.replay(record)
    return outcome.records


def _cluster(brokers: int = 3, seed: int = 1) -> tuple[MetadataImage, SeededIds]:
    image = MetadataImage()
    ids = SeededIds(seed)
    for node in range(1, brokers + 1):
        _apply(image, controller.register_broker(
            image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)], ids.uuid()))
    return image, ids


def _topic(image: MetadataImage, ids: SeededIds, rf: int = 3, name: str = "t",
           partitions: int = 1, configs: dict[str, str | None] | None = None) -> PartitionImage:
    """Creates the topic; returns its partition 0 (a live view: replays update it)."""
    _apply(image, controller.create_topic(image, name, partitions, rf, configs or {}, node_id=1,
                                          default_partitions=1, topic_id=ids.uuid()))
    return image.topics[name].partitions[0]


def _alter(image: MetadataImage, p: PartitionImage, isr: list[int], *, sender: int | None = None,
           topic: str | uuid.UUID = "t", leader_epoch: int | None = None,
           partition_epoch: int | None = None, broker_epoch: int | None = None,
           member_epochs: dict[int, int] | None = None,
           ) -> tuple[controller.Outcome, controller.PartitionState | None]:
    """AlterPartition for ``p`` as its leader (or ``sender``) would send it."""
    sender = p.leader if sender is None else sender
    if broker_epoch is None:
        broker_epoch = image.brokers[sender].epoch if sender in image.brokers else -1
    return controller.alter_partition(
        image, sender, broker_epoch, topic, p.partition,
        p.leader_epoch if leader_epoch is None else leader_epoch,
        p.partition_epoch if partition_epoch is None else partition_epoch,
        isr, member_epochs)


def _only_change(records: list[Any]) -> PartitionChangeRecord:
    changes = [r for r in records if isinstance(r, PartitionChangeRecord)]
    assert len(changes) == 1, records
    return changes[0]


def _set_broker_config(image: MetadataImage, key: str, value: str) -> None:
    image.replay(ConfigRecord(BROKER_RESOURCE, "", key, value))


# -- replication factor --------------------------------------------------------------


def test_a_topic_with_three_replicas_has_all_in_the_isr_and_the_first_leads() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids, rf=3)
    assert sorted(p.replicas) == [1, 2, 3]
    assert p.isr == p.replicas
    assert p.leader == p.replicas[0]
    assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert p.adding_replicas == [] and p.removing_replicas == []


def test_more_replicas_than_live_brokers_is_refused_on_create_and_on_create_partitions() -> None:
    image, ids = _cluster(3)
    _topic(image, ids, rf=3)
    too_many = controller.create_topic(image, "u", 1, 4, {}, node_id=1, default_partitions=1,
                                       topic_id=ids.uuid())
    assert too_many.error == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s)" in (too_many.message or "")
    _apply(image, controller.create_partitions(image, "t", 2, node_id=1))
    assert len(image.topics["t"].partitions[1].replicas) == 3  # the topic's factor
    _apply(image, controller.fence_broker(image, 3))
    short = controller.create_partitions(image, "t", 3, node_id=1)
    assert short.error == ErrorCode.INVALID_REPLICATION_FACTOR
    assert short.records == []


# -- AlterPartition ------------------------------------------------------------------


def test_an_isr_shrink_writes_one_change_keeping_the_leader_and_answers_the_new_state() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    leader, _, last = p.replicas
    outcome, state = _alter(image, p, [leader, p.replicas[1]])
    record = _only_change(outcome.records)
    assert record.isr == [leader, p.replicas[1]] and record.leader == -2
    assert record.replicas is None
    _apply(image, outcome)
    assert last not in p.isr and p.leader == leader
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)
    assert state == controller.PartitionState(leader, 0, p.isr, 1)


def test_an_isr_expansion_and_an_unchanged_isr() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    _apply(image, _alter(image, p, p.replicas[:1])[0])
    outcome, state = _alter(image, p, p.replicas)
    _apply(image, outcome)
    assert p.isr == p.replicas and p.partition_epoch == 2
    same, state = _alter(image, p, list(p.isr))
    assert same.error == ErrorCode.NONE and same.records == []  # nothing to write
    assert state == controller.PartitionState(p.leader, 0, p.isr, 2)


def test_a_partition_addressed_by_topic_id() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    tid = image.topics["t"].topic_id
    outcome, state = _alter(image, p, p.replicas[:2], topic=tid)
    assert outcome.error == ErrorCode.NONE and state is not None
    unknown_id, none = _alter(image, p, p.replicas[:2], topic=uuid.UUID(int=7))
    assert unknown_id.error == ErrorCode.UNKNOWN_TOPIC_ID and none is None
    gone = controller.alter_partition(image, p.leader, -1, tid, 5, 0, 0, p.replicas)[0]
    assert gone.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_an_unknown_topic_or_partition_by_name() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    assert _alter(image, p, p.replicas, topic="nope")[0].error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    missing = controller.alter_partition(image, p.leader, -1, "t", 1, 0, 0, p.replicas)[0]
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and missing.records == []


def test_epochs_above_the_image_mean_this_controller_is_behind() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    ahead_leader = _alter(image, p, p.replicas[:2], leader_epoch=1)[0]
    ahead_partition = _alter(image, p, p.replicas[:2], partition_epoch=1)[0]
    assert ahead_leader.error == ErrorCode.NOT_CONTROLLER
    assert ahead_partition.error == ErrorCode.NOT_CONTROLLER
    assert ahead_leader.records == [] and ahead_partition.records == []


def test_an_old_leader_epoch_is_fenced_even_from_a_former_leader() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    old = p.leader
    _apply(image, controller.fence_broker(image, old))
    _apply(image, controller.unfence_broker(image, old))
    assert p.leader != old and p.leader_epoch == 1
    stale = _alter(image, p, [old], sender=old, leader_epoch=0)[0]
    assert stale.error == ErrorCode.FENCED_LEADER_EPOCH  # checked before "not the leader"


def test_a_sender_that_does_not_lead_is_an_invalid_request() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    follower = p.replicas[1]
    outcome = _alter(image, p, [follower], sender=follower)[0]
    assert outcome.error == ErrorCode.INVALID_REQUEST


def test_an_isr_that_is_empty_repeats_leaves_the_replicas_or_lacks_the_leader() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    outsider = next(b for b in image.brokers if b not in p.replicas)
    for isr in ([], [p.leader, p.leader], [p.leader, outsider], p.replicas[1:]):
        outcome, state = _alter(image, p, isr)
        assert outcome.error == ErrorCode.INVALID_REQUEST, isr
        assert state is None


def test_an_old_partition_epoch_is_refused_before_the_isr_is_looked_at() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    _apply(image, _alter(image, p, p.replicas[:2])[0])
    stale = _alter(image, p, p.replicas, partition_epoch=0)[0]
    assert stale.error == ErrorCode.INVALID_UPDATE_VERSION
    bad_isr_too = _alter(image, p, [], partition_epoch=0)[0]  # Kafka's order
    assert bad_isr_too.error == ErrorCode.INVALID_UPDATE_VERSION


def test_a_fenced_unregistered_or_reincarnated_replica_cannot_join_the_isr() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    leader, a, b = p.replicas
    _apply(image, _alter(image, p, [leader])[0])
    _apply(image, controller.fence_broker(image, a))
    fenced = _alter(image, p, [leader, a])[0]
    assert fenced.error == ErrorCode.INELIGIBLE_REPLICA and "fenced" in (fenced.message or "")
    image.replay(UnregisterBrokerRecord(broker_id=a, broker_epoch=image.brokers[a].epoch))
    gone = _alter(image, p, [leader, a])[0]
    assert gone.error == ErrorCode.INELIGIBLE_REPLICA
    assert "not registered" in (gone.message or "")
    epoch = image.brokers[b].epoch
    wrong = _alter(image, p, [leader, b], member_epochs={b: epoch + 5})[0]
    assert wrong.error == ErrorCode.INELIGIBLE_REPLICA
    for epochs in ({b: epoch}, {b: -1}, None):  # the right epoch, or none given
        assert _alter(image, p, [leader, b], member_epochs=epochs)[0].error == ErrorCode.NONE


def test_members_already_in_the_isr_are_not_checked_for_eligibility() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    leader, a, _ = p.replicas
    image.replay(FenceBrokerRecord(id=a, epoch=image.brokers[a].epoch))  # still in the ISR
    outcome = _alter(image, p, [leader, a])[0]
    assert outcome.error == ErrorCode.NONE


def test_a_stale_or_unknown_sender_epoch_is_refused_first() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    epoch = image.brokers[p.leader].epoch
    stale = _alter(image, p, p.replicas[:2], broker_epoch=epoch + 1)[0]
    assert stale.error == ErrorCode.STALE_BROKER_EPOCH
    first = _alter(image, p, [], topic="nope", broker_epoch=epoch + 1)[0]
    assert first.error == ErrorCode.STALE_BROKER_EPOCH  # before the partition is looked up
    stranger = controller.alter_partition(image, 99, -1, "t", 0, 0, 0, [99])[0]
    assert stranger.error == ErrorCode.STALE_BROKER_EPOCH
    unchecked = _alter(image, p, p.replicas[:2], broker_epoch=-1)[0]
    assert unchecked.error == ErrorCode.NONE
    assert controller.check_broker_epoch(image, p.leader, epoch).error == ErrorCode.NONE


# -- fencing -------------------------------------------------------------------------


def test_a_fenced_follower_leaves_the_isr_and_the_leader_epoch_stays() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    leader, follower, _ = p.replicas
    record = _only_change(_apply(image, controller.fence_broker(image, follower)))
    assert record.leader == -2 and follower not in (record.isr or [])
    assert p.leader == leader and follower not in p.isr
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)


def test_a_fenced_leader_hands_over_to_the_first_live_isr_replica_in_assignment_order() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    _apply(image, _alter(image, p, [first, third, second])[0])  # ISR order differs
    record = _only_change(_apply(image, controller.fence_broker(image, first)))
    assert record.leader == second and record.isr == [third, second]  # one record for both
    assert p.leader == second and p.leader_epoch == 1 and first not in p.isr


def test_the_last_isr_member_stays_and_the_partition_goes_leaderless() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    _apply(image, controller.fence_broker(image, third))
    _apply(image, controller.fence_broker(image, second))
    assert p.isr == [first] and p.leader == first
    record = _only_change(_apply(image, controller.fence_broker(image, first)))
    assert record.leader == -1 and record.isr is None
    assert p.leader == -1 and p.isr == [first]
    assert controller.fence_broker(image, first).records == []  # already fenced


def test_a_fenced_leader_without_a_live_successor_keeps_the_isr() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    _apply(image, _alter(image, p, [first, second])[0])
    image.replay(FenceBrokerRecord(id=second, epoch=image.brokers[second].epoch))
    record = _only_change(_apply(image, controller.fence_broker(image, first)))
    assert record.leader == -1 and record.isr is None
    assert p.isr == [first, second] and p.leader == -1
    assert third in partition_changes.live_brokers(image)  # live, but not in sync


def test_with_unclean_election_a_fenced_last_member_hands_over_to_a_live_replica() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids, configs={UNCLEAN: "true"})
    first, second, _ = p.replicas
    _apply(image, _alter(image, p, [first])[0])
    record = _only_change(_apply(image, controller.fence_broker(image, first)))
    assert record.leader == second and record.isr == [second]
    assert p.leader == second and p.isr == [second]


# -- a broker comes back -------------------------------------------------------------


def _leaderless(image: MetadataImage, p: PartitionImage) -> tuple[int, int, int]:
    """Shrinks the ISR to the leader, then fences every replica (the leader
    last): the partition is left with leader -1 and ISR [first]."""
    first, second, third = p.replicas
    _apply(image, _alter(image, p, [first])[0])
    for broker in (third, second, first):
        _apply(image, controller.fence_broker(image, broker))
    assert p.leader == -1 and p.isr == [first]
    return first, second, third


def test_the_last_isr_member_leads_again_when_unfenced_or_registered_anew() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, _, _ = _leaderless(image, p)
    record = _only_change(_apply(image, controller.unfence_broker(image, first)))
    assert record.leader == first and record.isr is None
    assert p.leader == first and p.leader_epoch == 2
    _apply(image, controller.fence_broker(image, first))
    assert p.leader == -1
    _apply(image, controller.register_broker(
        image, first, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid()))
    assert p.leader == first and p.leader_epoch == 4


def test_without_unclean_election_another_replica_coming_back_leads_nothing() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    _, second, _ = _leaderless(image, p)
    records = _apply(image, controller.unfence_broker(image, second))
    assert not any(isinstance(r, PartitionChangeRecord) for r in records)
    assert p.leader == -1


def test_with_unclean_election_by_topic_config_a_live_replica_leads_alone() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids, configs={UNCLEAN: "true"})
    first, second, third = p.replicas
    _apply(image, _alter(image, p, [first])[0])
    for broker in (third, second):
        _apply(image, controller.fence_broker(image, broker))
    _apply(image, controller.fence_broker(image, first))  # no live replica: leaderless
    assert p.leader == -1
    record = _only_change(_apply(image, controller.unfence_broker(image, third)))
    assert record.leader == third and record.isr == [third]


def test_unclean_election_by_cluster_config_unless_the_topic_turns_it_off() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    q = _topic(image, ids, name="q", configs={UNCLEAN: "false"})
    _apply(image, _alter(image, p, [p.leader])[0])
    _apply(image, _alter(image, q, [q.leader], topic="q")[0])
    for broker in (1, 2, 3):
        _apply(image, controller.fence_broker(image, broker))
    assert p.leader == q.leader == -1
    _set_broker_config(image, UNCLEAN, "true")
    assert partition_changes.unclean_election_enabled(image, "t")
    assert not partition_changes.unclean_election_enabled(image, "q")
    back = min({1, 2, 3} - {p.isr[0], q.isr[0]})
    _apply(image, controller.unfence_broker(image, back))
    assert p.leader == back and p.isr == [back]
    assert q.leader == -1  # the topic's "false" wins over the cluster's "true"


def test_unclean_election_by_the_controllers_server_properties_below_dynamic_and_topic() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    q = _topic(image, ids, name="q", configs={UNCLEAN: "false"})
    assert not partition_changes.unclean_election_enabled(image, "t")
    image.static_configs = {UNCLEAN: "true"}  # server.properties of the controller
    assert partition_changes.unclean_election_enabled(image, "t")
    assert not partition_changes.unclean_election_enabled(image, "q")  # the topic wins
    _set_broker_config(image, UNCLEAN, "false")  # the dynamic cluster default wins
    assert not partition_changes.unclean_election_enabled(image, "t")
    assert p.leader != -1 and q.leader != -1


# -- ElectLeaders --------------------------------------------------------------------


def test_preferred_election_moves_the_leader_back_once_the_first_replica_is_in_sync() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, _ = p.replicas
    _apply(image, controller.fence_broker(image, first))
    _apply(image, controller.unfence_broker(image, first))
    assert p.leader == second and first not in p.isr
    assert controller.preferred_imbalance(image) == []  # not in sync yet
    results, outcome = controller.elect_leaders(image, controller.PREFERRED, [("t", 0)])
    assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert outcome.records == []
    _apply(image, _alter(image, p, [*p.isr, first])[0])
    assert controller.preferred_imbalance(image) == [("t", 0)]
    results, outcome = controller.elect_leaders(image, controller.PREFERRED, [("t", 0)])
    assert results == {("t", 0): (ErrorCode.NONE, None)}
    record = _only_change(_apply(image, outcome))
    assert record.leader == first and record.isr is None
    assert p.leader == first and controller.preferred_imbalance(image) == []
    again, none = controller.elect_leaders(image, controller.PREFERRED, [("t", 0)])
    assert again[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED and none.records == []


def test_preferred_election_needs_the_first_replica_live() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first = p.replicas[0]
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=image.topics["t"].topic_id,
                                       leader=p.replicas[1]))
    image.replay(FenceBrokerRecord(id=first, epoch=image.brokers[first].epoch))
    results, outcome = controller.elect_leaders(image, controller.PREFERRED, [("t", 0)])
    assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert outcome.records == [] and controller.preferred_imbalance(image) == []


def test_unclean_election_prefers_a_live_isr_member_then_any_live_replica() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    tid = image.topics["t"].topic_id
    led, _ = controller.elect_leaders(image, controller.UNCLEAN, [("t", 0)])
    assert led[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    first, second, third = p.replicas
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=-1,
                                       isr=[third, second]))
    results, outcome = controller.elect_leaders(image, controller.UNCLEAN, [("t", 0)])
    record = _only_change(outcome.records)
    assert results[("t", 0)] == (ErrorCode.NONE, None)
    assert record.leader == second and record.isr is None  # in sync: nothing lost
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[first]))
    image.replay(FenceBrokerRecord(id=first, epoch=image.brokers[first].epoch))
    results, outcome = controller.elect_leaders(image, controller.UNCLEAN, [("t", 0)])
    record = _only_change(_apply(image, outcome))
    assert record.leader == second and record.isr == [second]  # topic config not needed


def test_unclean_election_with_no_live_replica_and_unknown_partitions() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    _leaderless(image, p)
    results, outcome = controller.elect_leaders(
        image, controller.UNCLEAN, [("t", 0), ("t", 9), ("nope", 0)])
    assert results[("t", 0)][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert results[("t", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert outcome.records == []


def test_electing_for_all_partitions_leaves_out_those_that_need_nothing() -> None:
    image, ids = _cluster(3)
    _topic(image, ids, partitions=3)
    tid = image.topics["t"].topic_id
    parts = image.topics["t"].partitions
    image.replay(PartitionChangeRecord(partition_id=1, topic_id=tid, leader=parts[1].replicas[1]))
    results, outcome = controller.elect_leaders(image, controller.PREFERRED, None)
    assert results == {("t", 1): (ErrorCode.NONE, None)}
    assert _only_change(outcome.records).partition_id == 1
    unclean, nothing = controller.elect_leaders(image, controller.UNCLEAN, None)
    assert unclean == {} and nothing.records == []


def test_an_unknown_election_type_fails_the_request() -> None:
    image, ids = _cluster(3)
    _topic(image, ids)
    results, outcome = controller.elect_leaders(image, 7, None)
    assert outcome.error == ErrorCode.INVALID_REQUEST and results == {}


# -- reassignment --------------------------------------------------------------------


def test_a_reassignment_adds_first_and_completes_when_the_new_replica_is_in_sync() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    first, second, third = p.replicas
    (fourth,) = set(image.brokers) - set(p.replicas)
    record = _only_change(_apply(image, controller.alter_reassignment(
        image, "t", 0, [first, second, fourth])))
    assert record.replicas == [first, second, fourth, third]
    assert record.adding_replicas == [fourth] and record.removing_replicas == [third]
    assert record.leader == -2 and record.isr is None
    assert controller.list_reassignments(image) == [controller.OngoingReassignment(
        "t", 0, [first, second, fourth, third], [fourth], [third])]
    assert controller.complete_reassignments(image).records == []  # fourth not in sync
    outcome, state = _alter(image, p, [*p.isr, fourth])
    record = _only_change(_apply(image, outcome))  # the expansion completes it
    assert record.replicas == [first, second, fourth] and record.isr == [first, second, fourth]
    assert record.adding_replicas == [] and record.removing_replicas == []
    assert record.leader == first  # the replica set shrank: the leader epoch rises
    assert state == controller.PartitionState(first, 1, [first, second, fourth], 2)
    assert p.replicas == [first, second, fourth] and controller.list_reassignments(image) == []


def test_completing_a_reassignment_that_removes_the_leader_moves_it() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    first, second, third = p.replicas
    (fourth,) = set(image.brokers) - set(p.replicas)
    _apply(image, controller.alter_reassignment(image, "t", 0, [fourth, third, second]))
    tid = image.topics["t"].topic_id
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=tid,
                                       isr=[first, second, third, fourth]))
    record = _only_change(_apply(image, controller.complete_reassignments(image)))
    assert record.leader == fourth and record.replicas == [fourth, third, second]
    assert p.leader == fourth and p.isr == [second, third, fourth]


def test_a_reassignment_waits_until_every_target_replica_is_in_sync() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    _apply(image, _alter(image, p, [first, third])[0])
    record = _only_change(_apply(image, controller.alter_reassignment(
        image, "t", 0, [first, second])))
    assert record.removing_replicas == [third] and record.adding_replicas is None
    assert p.replicas == [first, second, third]
    assert controller.complete_reassignments(image).records == []  # second lags
    _apply(image, _alter(image, p, [first, third, second])[0])
    assert p.replicas == [first, second] and p.isr == [first, second]


def test_a_reorder_completes_at_once_without_a_new_leader_epoch() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    first, second, third = p.replicas
    record = _only_change(_apply(image, controller.alter_reassignment(
        image, "t", 0, [third, second, first])))
    assert record.replicas == [third, second, first] and record.leader == -2
    assert p.leader == first and p.leader_epoch == 0
    assert controller.preferred_imbalance(image) == [("t", 0)]
    assert controller.alter_reassignment(image, "t", 0, list(p.replicas)).records == []


def test_a_new_target_replaces_the_reassignment_under_way() -> None:
    image, ids = _cluster(5)
    p = _topic(image, ids)
    first, second, third = p.replicas
    fourth, fifth = sorted(set(image.brokers) - set(p.replicas))
    _apply(image, controller.alter_reassignment(image, "t", 0, [first, second, fourth]))
    record = _only_change(_apply(image, controller.alter_reassignment(
        image, "t", 0, [first, second, fifth])))
    assert record.replicas == [first, second, fifth, *sorted([third, fourth])]
    assert record.adding_replicas == [fifth]
    assert record.removing_replicas == sorted([third, fourth])


def test_cancelling_drops_the_added_replicas() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    original = list(p.replicas)
    (fourth,) = set(image.brokers) - set(p.replicas)
    none = controller.alter_reassignment(image, "t", 0, None)
    assert none.error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    _apply(image, controller.alter_reassignment(image, "t", 0, [fourth, *original[1:]]))
    record = _only_change(_apply(image, controller.alter_reassignment(image, "t", 0, None)))
    # As in Kafka: the target order, less the added replicas, then the removed ones.
    assert record.replicas == [*original[1:], original[0]]
    assert record.adding_replicas == [] and record.removing_replicas == []
    assert record.leader == original[0]  # the replica set shrank: the leader epoch rises
    assert p.isr == original and p.leader_epoch == 1
    assert controller.list_reassignments(image) == []


def test_cancelling_when_only_new_replicas_are_in_sync_needs_unclean_election() -> None:
    image, ids = _cluster(2)
    p = _topic(image, ids, rf=1)
    (old,) = p.replicas
    (new,) = set(image.brokers) - {old}
    _apply(image, controller.alter_reassignment(image, "t", 0, [new]))
    tid = image.topics["t"].topic_id
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=new, isr=[new]))
    refused = controller.alter_reassignment(image, "t", 0, None)
    assert refused.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT and refused.records == []
    _apply(image, controller.alter_topic_configs(image, "t", {UNCLEAN: "true"}))
    record = _only_change(_apply(image, controller.alter_reassignment(image, "t", 0, None)))
    assert record.replicas == [old] and record.isr == [old] and record.leader == old


def test_invalid_targets_and_unknown_partitions() -> None:
    image, ids = _cluster(3)
    p = _topic(image, ids)
    for target in ([], [p.leader, p.leader], [p.leader, 42]):
        outcome = controller.alter_reassignment(image, "t", 0, target)
        assert outcome.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT, target
    assert controller.alter_reassignment(image, "t", 3, [1]).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert controller.alter_reassignment(image, "x", 0, None).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_new_partitions_take_the_target_size_of_a_reassignment_under_way() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    (fourth,) = set(image.brokers) - set(p.replicas)
    _apply(image, controller.alter_reassignment(image, "t", 0, [fourth, *p.replicas[1:]]))
    assert len(p.replicas) == 4
    _apply(image, controller.create_partitions(image, "t", 2, node_id=1))
    assert len(image.topics["t"].partitions[1].replicas) == 3


def test_a_reassignment_under_way_survives_a_snapshot() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    (fourth,) = set(image.brokers) - set(p.replicas)
    _apply(image, controller.alter_reassignment(image, "t", 0, [fourth, *p.replicas[1:]]))
    copy_ = MetadataImage()
    for record in image.to_records():
        copy_.replay(record)
    copy_.derived.clear()
    image.derived.clear()
    assert copy_ == image
    assert copy_.topics["t"].partitions[0].adding_replicas == [fourth]


# -- purity --------------------------------------------------------------------------


def test_no_decision_changes_the_image() -> None:
    image, ids = _cluster(4)
    p = _topic(image, ids)
    (fourth,) = set(image.brokers) - set(p.replicas)
    before = copy.deepcopy(image)
    _alter(image, p, p.replicas[:2])
    controller.fence_broker(image, p.leader)
    controller.unfence_broker(image, p.leader)
    controller.elect_leaders(image, controller.PREFERRED, None)
    controller.elect_leaders(image, controller.UNCLEAN, None)
    controller.alter_reassignment(image, "t", 0, [fourth])
    controller.complete_reassignments(image)
    controller.preferred_imbalance(image)
    controller.list_reassignments(image)
    assert image == before


def test_a_leader_registering_anew_within_its_session_hands_over_at_a_new_epoch() -> None:
    """A leader killed and restarted before its session ran out registers a new
    incarnation while still unfenced. Its old incarnation is fenced first: the
    partition moves to another ISR member at a new epoch and the restarted
    broker leaves the ISR (it kept leading at the same epoch, from a
    checkpointed HW: the chaos harness saw the HW go from 88 back to 11)."""
    image, ids = _cluster(3)
    p = _topic(image, ids)
    old_leader, old_epoch = p.leader, p.leader_epoch
    _apply(image, controller.register_broker(
        image, old_leader, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid(), fence_previous=True))
    assert p.leader != old_leader and p.leader_epoch > old_epoch
    assert old_leader not in p.isr and not image.brokers[old_leader].fenced
    # The only ISR member comes back: it leads again, at a new epoch.
    q = _topic(image, ids, name="u")
    only = q.leader
    for other in (b for b in (1, 2, 3) if b != only):
        _apply(image, controller.fence_broker(image, other))
    epoch = q.leader_epoch
    _apply(image, controller.register_broker(
        image, only, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid(), fence_previous=True))
    assert q.leader == only and q.isr == [only] and q.leader_epoch > epoch
    # Without fence_previous (a single node's own registration) nothing moves.
    epoch = q.leader_epoch
    _apply(image, controller.register_broker(
        image, only, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid()))
    assert q.leader == only and q.leader_epoch == epoch


def test_partitions_a_returning_broker_leads_alone_take_one_record_each() -> None:
    """A broker that comes back while its previous incarnation is still
    unfenced (the last node of a cluster stopped together cannot shut down in
    a controlled way) takes back the partitions it is the only ISR member of
    with one record each, where fencing and then unfencing it write two: the
    same end state, at a new leader epoch. A partition it led with other ISR
    members still moves to one of them."""
    image, ids = _cluster(3)
    shared = _topic(image, ids, rf=3, name="shared")
    node = shared.leader
    _topic(image, ids, rf=1, name="alone", partitions=6)
    alone = image.topics["alone"]
    mine = [p for p in alone.partitions.values() if p.leader == node]
    assert mine
    before = {p.partition: p.leader_epoch for p in mine}
    fenced = controller.fence_broker(image, node).records
    assert {r.partition_id for r in fenced if isinstance(r, PartitionChangeRecord)
            and r.topic_id == alone.topic_id} == set(before)  # the first of two each
    records = _apply(image, controller.register_broker(
        image, node, [Endpoint("PLAINTEXT", "h", 1)], ids.uuid(), fence_previous=True))
    changed = [r.partition_id for r in records
               if isinstance(r, PartitionChangeRecord) and r.topic_id == alone.topic_id]
    assert sorted(changed) == sorted(before)  # one each
    for p in mine:
        assert p.leader == node and p.isr == [node]
        assert p.leader_epoch == before[p.partition] + 1
    assert not image.brokers[node].fenced
    assert shared.leader not in (node, -1) and node not in shared.isr


def test_manual_assignments_place_each_partition_where_asked() -> None:
    image = MetadataImage()
    ids = SeededIds(77)
    for b in (1, 2, 3):
        _apply(image, controller.register_broker(image, b, [Endpoint("P", "h", b)], ids.uuid()))
    outcome = controller.create_topic(image, "manual", -1, -1, {}, node_id=1,
                                      default_partitions=1, topic_id=ids.uuid(),
                                      assignments=[[3, 1], [2, 3]])
    _apply(image, outcome)
    parts = image.topics["manual"].partitions
    assert [(p.replicas, p.isr, p.leader) for p in parts.values()] == [
        ([3, 1], [3, 1], 3), ([2, 3], [2, 3], 2)]
    for bad in ([[1, 1]], [[1, 2], [3]], [[1, 9]], [[]]):
        refused = controller.create_topic(image, "bad", -1, -1, {}, node_id=1,
                                          default_partitions=1, topic_id=ids.uuid(),
                                          assignments=bad)
        assert refused.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad


_REPLICAS = st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True)


@given(replicas=_REPLICAS, isr_mask=st.lists(st.booleans(), min_size=3, max_size=3),
       live=st.sets(st.integers(1, 5)), unclean=st.booleans(),
       dir_kind=st.sampled_from(["none", "home", "lost"]),
       adding=st.booleans(), homes=st.booleans())
def test_a_leaderless_partition_passed_over_would_have_settled_to_nothing(
        replicas: list[int], isr_mask: list[bool], live: set[int], unclean: bool,
        dir_kind: str, adding: bool, homes: bool) -> None:
    """The shortcut the elections of leaderless partitions take at a broker's
    registration (:func:`partition_changes._may_settle`) skips only partitions
    for which the full decision writes no record."""
    from odradek.metadata import directories as dirs

    home = uuid.UUID(int=7)
    directories = {"none": [], "home": [home] * len(replicas),
                   "lost": [dirs.LOST] + [home] * (len(replicas) - 1)}[dir_kind]
    p = PartitionImage(0, replicas=replicas,
                       isr=[r for r, keep in zip(replicas, isr_mask, strict=False) if keep],
                       leader=-1, leader_epoch=3, partition_epoch=5,
                       adding_replicas=replicas[-1:] if adding and len(replicas) > 1 else [],
                       directories=directories)
    topic = TopicImage("t", uuid.UUID(int=1), {0: p})
    record = partition_changes._settle(topic, p, live, unclean,
                                       homes=dict.fromkeys(range(1, 6), home) if homes else {})
    if not partition_changes._may_settle(p, live):
        assert record is None

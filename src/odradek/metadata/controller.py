"""The controller's decisions as pure functions: requests in, records out.

Nothing here changes the image; the caller appends the returned records to the
metadata log and replays them (DESIGN.md decision 4). Validation follows
Kafka's rules and error codes. The decisions about replicated partitions (ISR
changes, elections, reassignment) are in :mod:`odradek.metadata.partition_changes`
and are re-exported here.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.metadata import features
from odradek.metadata.directories import UNASSIGNED, homes
from odradek.metadata.image import FENCE, TOPIC_RESOURCE, UNFENCE, Endpoint, MetadataImage
from odradek.metadata.outcome import Outcome as Outcome
from odradek.metadata.partition_changes import PREFERRED as PREFERRED
from odradek.metadata.partition_changes import UNCLEAN as UNCLEAN
from odradek.metadata.partition_changes import OngoingReassignment as OngoingReassignment
from odradek.metadata.partition_changes import PartitionState as PartitionState
from odradek.metadata.partition_changes import alter_partition as alter_partition
from odradek.metadata.partition_changes import alter_reassignment as alter_reassignment
from odradek.metadata.partition_changes import check_broker_epoch as check_broker_epoch
from odradek.metadata.partition_changes import complete_reassignments as complete_reassignments
from odradek.metadata.partition_changes import elect_leaders as elect_leaders
from odradek.metadata.partition_changes import list_reassignments as list_reassignments
from odradek.metadata.partition_changes import (
    on_broker_fenced,
    on_broker_live,
    on_controller_active,
    on_replicas_lost,
)
from odradek.metadata.partition_changes import preferred_imbalance as preferred_imbalance
from odradek.metadata.topic_configs import validate_topic_config
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from odradek.wire.internal.config_record import ConfigRecord
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.internal.partition_change_record import PartitionChangeRecord
from odradek.wire.internal.partition_record import PartitionRecord
from odradek.wire.internal.producer_ids_record import ProducerIdsRecord
from odradek.wire.internal.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from odradek.wire.internal.remove_topic_record import RemoveTopicRecord
from odradek.wire.internal.topic_record import TopicRecord

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Topics whose loss loses every group's offsets or every transaction's state."""
ALLOW_INTERNAL_CHANGES = "odradek.allow.internal.topic.changes"
"""A broker setting (default false) that lets clients delete internal topics,
change their partition count or configs that would drop their data: for a
recovery only."""
_INTERNAL_RETENTION_FLOOR_MS = 7 * 24 * 3_600_000
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 100_000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return (
            f"Topic name {name!r} contains characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def _collides(image: MetadataImage, name: str) -> str | None:
    norm = name.replace(".", "_")
    for existing in image.topics:
        if existing != name and existing.replace(".", "_") == norm:
            return existing
    return None


def create_topic(
    image: MetadataImage,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None],
    *,
    node_id: int,
    default_partitions: int,
    topic_id: uuid.UUID,
    assignments: list[list[int]] | None = None,
) -> Outcome:
    """Records for a new topic, or the error Kafka would return. Each partition's
    replicas are placed on live brokers (:func:`place_replicas`); all are in the
    ISR and the first leads. The replication factor (-1: 1) may not exceed the
    live brokers (a node with none registered yet counts itself). Manual
    ``assignments`` (one replica list per partition) must name distinct
    registered brokers, the same number for every partition
    (INVALID_REPLICA_ASSIGNMENT otherwise)."""
    problem = topic_name_error(name)
    if problem:
        return Outcome.fail(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if name in image.topics:
        return Outcome.fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    other = _collides(image, name)
    if other:
        return Outcome.fail(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{name}' collides with existing topic: {other}",
        )
    if assignments is not None:
        bad = _bad_assignment(image, assignments, node_id)
        if bad:
            return Outcome.fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad)
        num_partitions, replication_factor = len(assignments), len(assignments[0])
    partitions = default_partitions if num_partitions == -1 else num_partitions
    if partitions < 1 or partitions > MAX_PARTITIONS:
        return Outcome.fail(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be positive.")
    rf = 1 if replication_factor == -1 else replication_factor
    if rf < 1:
        return Outcome.fail(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    short = _too_few_brokers(image, rf)
    if short:
        return short
    for key, value in configs.items():
        problem = validate_topic_config(key, value)
        if problem:
            return Outcome.fail(ErrorCode.INVALID_CONFIG, problem)
    tid = topic_id
    records: list[Any] = [
        ConfigRecord(TOPIC_RESOURCE, name, key, value)
        for key, value in sorted(configs.items())
        if value is not None
    ]
    records.append(TopicRecord(name=name, topic_id=tid))
    records += _partition_records(image, tid, range(partitions), rf, node_id, assignments)
    return Outcome(records=records)


def _bad_assignment(image: MetadataImage, assignments: list[list[int]],
                    node_id: int) -> str | None:
    registered = set(image.brokers) or {node_id}
    if not assignments or not assignments[0]:
        return "The manual partition assignment includes an empty replica list."
    for p, replicas in enumerate(assignments):
        if len(replicas) != len(assignments[0]):
            return ("Inconsistent replication factor between partitions, partition 0 has "
                    f"{len(assignments[0])} while partition {p} has replication factor "
                    f"{len(replicas)}")
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers not allowed in replica assignment: {replicas}"
        unknown = [b for b in replicas if b not in registered]
        if unknown:
            return f"The manual partition assignment includes broker {unknown[0]}, " \
                   "but no such broker is registered."
    return None


def _too_few_brokers(image: MetadataImage, rf: int) -> Outcome | None:
    live_brokers = image.live_brokers() or 1
    if rf > live_brokers:
        return Outcome.fail(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication factor "
            f"of {rf} cannot be reached because only {live_brokers} broker(s) are registered.",
        )
    return None


def place_replicas(image: MetadataImage, tid: uuid.UUID, ids: range, rf: int,
                   node_id: int) -> list[list[int]]:
    """Replicas of each partition: striped over the live brokers from a start
    that depends on the topic id, so leaders spread over the cluster and topics
    do not all begin on the same broker; with ``broker.rack`` set, consecutive
    brokers in the stripe alternate racks (Kafka's rack-aware placement keeps a
    partition's replicas on different racks where it can). With no broker
    registered yet (a single node starting), the node itself."""
    live = sorted(b.node_id for b in image.brokers.values() if not b.fenced) or [node_id]
    racks: dict[str | None, list[int]] = {}
    for b in live:
        racks.setdefault(image.brokers[b].rack if b in image.brokers else None, []).append(b)
    if len(racks) > 1:  # interleave racks: r1a, r2a, r3a, r1b, ...
        columns = [racks[r] for r in sorted(racks, key=lambda r: (r is None, r or ""))]
        live = [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]
    n = len(live)
    start = tid.int % n
    return [[live[(start + p + i) % n] for i in range(min(rf, n))] for p in ids]


def _partition_records(image: MetadataImage, tid: uuid.UUID, ids: range, rf: int,
                       node_id: int, assignments: list[list[int]] | None = None) -> list[Any]:
    out = []
    placed = assignments if assignments is not None else place_replicas(
        image, tid, ids, rf, node_id)
    home = homes(image)
    for p, replicas in zip(ids, placed, strict=True):
        out.append(PartitionRecord(
            partition_id=p, topic_id=tid, replicas=replicas, isr=list(replicas),
            removing_replicas=[], adding_replicas=[], leader=replicas[0],
            leader_recovery_state=0, leader_epoch=0, partition_epoch=0,
            directories=[home.get(r, UNASSIGNED) for r in replicas],
        ))
    return out


def create_partitions(image: MetadataImage, name: str, count: int, *, node_id: int,
                      protect_internal: bool = True) -> Outcome:
    """Records for the partitions that take a topic to ``count``, with the
    topic's replication factor (INVALID_REPLICATION_FACTOR if fewer brokers are
    live), placed as :func:`create_topic` places them. An internal topic's
    count is not changed (INVALID_PARTITIONS: its keys would map to other
    partitions) unless ``protect_internal`` is false."""
    topic = image.topics.get(name)
    if topic is None:
        return Outcome.fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    if protect_internal and name in INTERNAL_TOPICS:
        return Outcome.fail(
            ErrorCode.INVALID_PARTITIONS,
            f"{name} is an internal topic: with more partitions its groups and transactional "
            f"ids would map to other partitions and lose {_what_is_lost(name)}. A broker "
            f"started with {ALLOW_INTERNAL_CHANGES}=true allows it, for a recovery.")
    current = len(topic.partitions)
    if count < current:
        return Outcome.fail(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, "
            f"which is higher than the requested {count}.",
        )
    if count == current:
        return Outcome.fail(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        )
    if count > MAX_PARTITIONS:
        return Outcome.fail(ErrorCode.INVALID_PARTITIONS, "Too many partitions.")
    rf = max((len(p.replicas) - len(p.removing_replicas) for p in topic.partitions.values()),
             default=1)  # a reassignment's target size, not its replicas in flight
    short = _too_few_brokers(image, rf)
    if short:
        return short
    return Outcome(records=_partition_records(image, topic.topic_id, range(current, count), rf,
                                              node_id))


def _what_is_lost(name: str) -> str:
    return ("every consumer group's committed offsets" if name == "__consumer_offsets"
            else "the state of every transaction")


def delete_topic(image: MetadataImage, name: str, *, protect_internal: bool = True) -> Outcome:
    """RemoveTopicRecord; an internal topic is refused (TOPIC_DELETION_DISABLED)
    unless ``protect_internal`` is false (:data:`ALLOW_INTERNAL_CHANGES`)."""
    topic = image.topics.get(name)
    if topic is None:
        return Outcome.fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    if protect_internal and name in INTERNAL_TOPICS:
        return Outcome.fail(
            ErrorCode.TOPIC_DELETION_DISABLED,
            f"{name} is an internal topic: deleting it would lose {_what_is_lost(name)}. "
            f"A broker started with {ALLOW_INTERNAL_CHANGES}=true allows it, for a recovery.")
    return Outcome(records=[RemoveTopicRecord(topic_id=topic.topic_id)])


def alter_topic_configs(
    image: MetadataImage, name: str, changes: Mapping[str, str | None], *,
    protect_internal: bool = True,
) -> Outcome:
    """``changes`` maps a config to its new value, or None to remove the override.
    On an internal topic a change that would let its data be deleted is refused
    (INVALID_CONFIG) unless ``protect_internal`` is false."""
    if name not in image.topics:
        return Outcome.fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    for key, value in changes.items():
        problem = validate_topic_config(key, value)
        if not problem and protect_internal and name in INTERNAL_TOPICS:
            problem = _internal_config_problem(name, key, value)
        if problem:
            return Outcome.fail(ErrorCode.INVALID_CONFIG, problem)
    return Outcome(
        records=[ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in sorted(changes.items())]
    )


def _internal_config_problem(name: str, key: str, value: str | None) -> str | None:
    """Why an internal topic may not take ``key=value`` (None: remove the override)."""
    loses = (f"{name} is an internal topic: this would let its records be deleted and lose "
             f"{_what_is_lost(name)}. A broker started with {ALLOW_INTERNAL_CHANGES}=true "
             f"allows it, for a recovery.")
    if key == "cleanup.policy":
        policies = {p.strip() for p in (value or "").split(",")}
        return None if policies == {"compact"} else f"cleanup.policy={value}: {loses}"
    if key in ("retention.ms", "retention.bytes") and value is not None:
        return None if int(value) < 0 or (
            key == "retention.ms" and int(value) >= _INTERNAL_RETENTION_FLOOR_MS) else (
            f"{key}={value}: {loses}")
    return None


def register_broker(
    image: MetadataImage, node_id: int, endpoints: list[Endpoint], incarnation_id: uuid.UUID,
    rack: str | None = None, *, fence_previous: bool = False,
    log_dirs: list[uuid.UUID] | None = None, at_offset: int | None = None,
) -> Outcome:
    """A broker (re)registers at start-up with its listeners; a single-node broker
    is unfenced at once (in a quorum the controller unfences it once it has
    caught up with the metadata log).

    The broker epoch is the offset of its RegisterBrokerRecord in the metadata
    log, as Kafka's controller assigns it: ``at_offset`` is the offset the
    first record of the outcome will take (the log's end when the controller
    decides: nothing is appended between the decision and its append), and the
    registration comes after the fencing and lost-replica records, so its
    epoch is ``at_offset`` plus their count. Every node replays the epoch from
    the record, and a snapshot keeps it, so all agree; a later registration
    lands at a later offset, so a restarted broker's epoch is larger. Without
    ``at_offset`` (decisions tested without a log) the epoch is one more than
    the largest in the image.

    With ``fence_previous`` (a cluster's BrokerRegistration), a new incarnation
    of a broker whose registration is still unfenced (it restarted within its
    session, after ``kill -9`` say) first fences the old one, as a missed
    session would: that process is gone, and the partitions
    it led must not stay led, at the same leader epoch, by a process that came
    back with only what its disk kept (a checkpointed high watermark, and after
    a power loss less of the log). Their leadership moves to another ISR member
    with a new epoch and the broker leaves the ISRs, to rejoin as a follower; a
    partition whose only ISR member it was is led by it again, at a new epoch.

    ``log_dirs`` are the ids of the broker's log directories (KIP-858). A
    replica that lived in a directory not among them lost its data (the disk
    was wiped and formatted again): it becomes LOST and leaves the ISR, even as
    its last member, and is not elected while another replica is not LOST
    (:func:`~odradek.metadata.partition_changes.on_replicas_lost`). Those
    records come before the registration, so the broker's partitions never go
    back to it on the strength of an empty log."""
    previous = image.brokers.get(node_id)
    if previous is not None and previous.incarnation_id == incarnation_id:
        return Outcome.fail(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                            f"Broker {node_id} is already registered with this incarnation")
    fenced = fence_broker(image, node_id).records if fence_previous else []
    after = image.replayed(fenced) if fenced else image
    lost = on_replicas_lost(after, node_id, log_dirs or [])
    if lost:
        after = after.replayed(lost)
    epoch = (max((b.epoch for b in image.brokers.values()), default=-1) + 1
             if at_offset is None else at_offset + len(fenced) + len(lost))
    register = RegisterBrokerRecord(
        broker_id=node_id, incarnation_id=incarnation_id, broker_epoch=epoch,
        end_points=[BrokerEndpoint(e.listener, e.host, e.port, e.security_protocol)
                    for e in endpoints],
        rack=rack, fenced=True, log_dirs=list(log_dirs or []),
    )
    if after is image:  # the registration changes only the brokers: share the rest
        after = dataclasses.replace(image, brokers=dict(image.brokers), derived={},
                                    topic_derived={})
    after.replay(register)
    fenced, unfenced = _fold_returns(fenced, lost, _unfence(after, node_id, epoch))
    return Outcome(records=[*fenced, *lost, register, *unfenced], atomic=False)


def _fold_returns(fenced: list[Any], lost: list[Any],
                  unfenced: list[Any]) -> tuple[list[Any], list[Any]]:
    """A partition that fencing the previous incarnation leaves without a
    leader and the new one's unfencing gives back to it (its only ISR member:
    every partition of an RF=1 topic on it, after a stop that could not shut
    down in a controlled way, as the last node of a cluster's) takes one
    record, not two: the fencing one with the unfencing one's fields over it,
    in the fencing one's place. Its end state is the same (each field is the
    last one written) but for the epochs, which rise by one, not two: a new
    leader epoch still, so the process that came back leads at an epoch its
    previous incarnation never had. At 100k partitions over three brokers
    this is a third of the records a cluster's restart writes, replicates and
    applies on every node. A partition that also lost its replica's directory
    keeps both records (its unfencing was decided after the loss)."""
    if not fenced:
        return fenced, unfenced
    returns = {(r.topic_id, r.partition_id): r for r in unfenced
               if isinstance(r, PartitionChangeRecord)}
    for r in lost:
        returns.pop((r.topic_id, r.partition_id), None)
    folded: set[tuple[uuid.UUID, int]] = set()
    out: list[Any] = []
    for r in fenced:
        back = (returns.get((r.topic_id, r.partition_id))
                if isinstance(r, PartitionChangeRecord) else None)
        if back is None:
            out.append(r)
            continue
        folded.add((r.topic_id, r.partition_id))
        out.append(_then(r, back))
    return out, [r for r in unfenced if not isinstance(r, PartitionChangeRecord)
                 or (r.topic_id, r.partition_id) not in folded]


def _then(first: PartitionChangeRecord, second: PartitionChangeRecord) -> PartitionChangeRecord:
    """One record doing what ``first`` then ``second`` do (the second's fields
    win where it has them), but for the epochs: one rise, not two."""
    def pick(a: Any, b: Any, unset: Any) -> Any:
        return a if b is unset or b == unset else b

    return PartitionChangeRecord(
        partition_id=first.partition_id, topic_id=first.topic_id,
        isr=pick(first.isr, second.isr, None),
        leader=pick(first.leader, second.leader, -2),
        replicas=pick(first.replicas, second.replicas, None),
        removing_replicas=pick(first.removing_replicas, second.removing_replicas, None),
        adding_replicas=pick(first.adding_replicas, second.adding_replicas, None),
        leader_recovery_state=pick(first.leader_recovery_state,
                                   second.leader_recovery_state, -1),
        directories=pick(first.directories, second.directories, None),
        eligible_leader_replicas=pick(first.eligible_leader_replicas,
                                      second.eligible_leader_replicas, None),
        last_known_elr=pick(first.last_known_elr, second.last_known_elr, None),
    )


def unfence_broker(image: MetadataImage, node_id: int) -> Outcome:
    """A fenced broker heartbeats again (it was cut off, not dead): unfence it.
    Nothing to do if it is not registered or not fenced."""
    broker = image.brokers.get(node_id)
    if broker is None or not broker.fenced:
        return Outcome()
    return Outcome(records=_unfence(image, node_id, broker.epoch), atomic=False)


def _unfence(image: MetadataImage, node_id: int, epoch: int) -> list[Any]:
    """The broker is live again: partitions left without a leader whose ISR holds
    it are led by it (with unclean election on, a leaderless partition whose ISR
    has no live member takes its first live replica;
    :func:`~odradek.metadata.partition_changes.on_broker_live`)."""
    return [BrokerRegistrationChangeRecord(broker_id=node_id, broker_epoch=epoch, fenced=UNFENCE),
            *on_broker_live(image, node_id)]


def elect_leaderless(image: MetadataImage) -> Outcome:
    """A controller just became active: a leader for every partition left
    without one whose ISR holds a live broker
    (:func:`~odradek.metadata.partition_changes.on_controller_active`)."""
    return Outcome(records=on_controller_active(image), atomic=False)


def fence_broker(image: MetadataImage, node_id: int) -> Outcome:
    """Fence a broker that missed its heartbeats (or asked to shut down). It
    leaves every ISR where other members remain (the last member stays). Where
    it led, the first replica in assignment order that is in the remaining ISR
    and live takes over; with none, the leader is -1 (clients see
    LEADER_NOT_AVAILABLE) and the ISR is left as it was, as Kafka does with
    unclean election off (with it on, the first live replica leads alone). One
    PartitionChangeRecord per changed partition
    (:func:`~odradek.metadata.partition_changes.on_broker_fenced`). Nothing to
    do if already fenced."""
    broker = image.brokers.get(node_id)
    if broker is None or broker.fenced:
        return Outcome()
    records: list[Any] = [BrokerRegistrationChangeRecord(
        broker_id=node_id, broker_epoch=broker.epoch, fenced=FENCE)]
    return Outcome(records=[*records, *on_broker_fenced(image, node_id)], atomic=False)


PRODUCER_ID_BLOCK = 1000


def allocate_producer_ids(image: MetadataImage, node_id: int) -> tuple[range, Outcome]:
    """A block of fresh producer ids and the record that reserves it."""
    start = image.next_producer_id
    block = range(start, start + PRODUCER_ID_BLOCK)
    record = ProducerIdsRecord(broker_id=node_id, broker_epoch=-1, next_producer_id=block.stop)
    return block, Outcome(records=[record])


METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION_LEVEL = features.METADATA_VERSION_LEVEL
"""Kafka 4.0's ``4.0-IV3``, the metadata version ``odradek storage format`` names."""


def finalize_features(image: MetadataImage, bootstrap: Sequence[Any] = ()) -> Outcome:
    """The records a new cluster's first active controller writes into its empty
    log (no ``metadata.version`` yet): the bootstrap metadata ``odradek storage
    format`` left (:func:`new_cluster_features`). Nothing once the log has them."""
    if METADATA_VERSION_FEATURE in image.features:
        return Outcome()
    return Outcome(records=new_cluster_features(bootstrap))


def new_cluster_features(bootstrap: Sequence[Any] = ()) -> list[Any]:
    """A new cluster's first records, from its bootstrap records. A bootstrap
    that names ``metadata.version`` is complete (``bootstrap.checkpoint``, as
    Kafka's format writes it): its records, as they are, with the
    ``metadata.version`` record first. Otherwise (an older format's
    ``bootstrap.records``, or none) the default feature levels with those the
    bootstrap names over them (``transaction.version`` 2 unless named,
    :mod:`odradek.metadata.features`), then the other bootstrap records."""
    if any(isinstance(r, FeatureLevelRecord) and r.name == METADATA_VERSION_FEATURE
           for r in bootstrap):
        first = [r for r in bootstrap if isinstance(r, FeatureLevelRecord)
                 and r.name == METADATA_VERSION_FEATURE]
        return [*first, *(r for r in bootstrap if r not in first)]
    named = {r.name: r.feature_level for r in bootstrap if isinstance(r, FeatureLevelRecord)}
    rest = [r for r in bootstrap if not isinstance(r, FeatureLevelRecord)]
    return [*features.new_cluster_records(named), *rest]

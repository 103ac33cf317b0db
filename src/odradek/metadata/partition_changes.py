"""The controller's decisions for replicated partitions: ISR changes asked by a
leader (AlterPartition), leader failover when a broker is fenced or comes back,
leader elections (ElectLeaders, the preferred-leader rebalance) and partition
reassignment (KIP-455).

Pure like :mod:`odradek.metadata.controller`: an image in, PartitionChangeRecords
out; nothing here changes the image. The rules and error codes are Kafka's
(KRaft controller, metadata version 3.6 or later, eligible leader replicas off):

* a broker is *live* when it is registered and not fenced;
* an election picks, in assignment order, the first replica that is in the ISR
  and live; with ``unclean.leader.election.enable`` (the topic's config, else the
  cluster's, default false) and no such replica, the first live replica, and the
  ISR becomes that replica alone;
* the ISR is never emptied by a fencing: its last member stays, leader -1, until
  it returns; it is emptied only when that member lost its log (a replica
  whose directory is LOST, :mod:`odradek.metadata.directories`), which is
  never elected while a replica of the partition is not LOST;
* a record changes the leader epoch only when it names a leader (even the same
  one, which is how a reassignment that drops replicas fences them), and every
  record bumps the partition epoch (:meth:`PartitionImage.apply`);
* a reassignment completes once the ISR, less the replicas being removed, is not
  empty and holds every target replica: the replicas become the target, the
  removed ones leave the ISR and a removed leader hands over to a target one. Any
  change to the partition (an ISR expansion, a fencing) completes it when it can.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.metadata import directories as dirs
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.metadata.outcome import Outcome
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.partition_change_record import PartitionChangeRecord

NO_LEADER = -1
NO_LEADER_CHANGE = -2
"""PartitionChangeRecord.leader when the leader does not change."""
PREFERRED = 0
UNCLEAN = 1
"""ElectLeaders election types."""
UNCLEAN_ELECTION_CONFIG = "unclean.leader.election.enable"


@dataclass(slots=True)
class PartitionState:
    """A partition's leadership as AlterPartition answers it."""

    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int


@dataclass(slots=True)
class OngoingReassignment:
    """A reassignment under way (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


def live_brokers(image: MetadataImage) -> set[int]:
    """Ids of the registered brokers that are not fenced."""
    return {b.node_id for b in image.brokers.values() if not b.fenced}


def unclean_election_enabled(image: MetadataImage, topic: str) -> bool:
    """``unclean.leader.election.enable`` of the topic, else the cluster default
    (a ConfigRecord of the broker resource ""), else the controller's own
    ``server.properties`` (:attr:`MetadataImage.static_configs`), else false."""
    t = image.topics.get(topic)
    value = t.configs.get(UNCLEAN_ELECTION_CONFIG) if t is not None else None
    if value is None:
        value = image.broker_configs.get("", {}).get(UNCLEAN_ELECTION_CONFIG)
    if value is None:
        value = image.static_configs.get(UNCLEAN_ELECTION_CONFIG, "false")
    return value.strip().lower() == "true"


def _copy(p: PartitionImage) -> PartitionImage:
    return PartitionImage(p.partition, list(p.replicas), list(p.isr), p.leader, p.leader_epoch,
                          p.partition_epoch, list(p.adding_replicas), list(p.removing_replicas),
                          list(p.directories))


def _record(topic_id: uuid.UUID, p: PartitionImage, *, leader: int, isr: list[int],
            replicas: list[int], adding: list[int], removing: list[int],
            directories: list[uuid.UUID]) -> PartitionChangeRecord | None:
    """The record taking ``p`` to the given state, with null for what does not
    change, or None when nothing does. A smaller replica set names the leader even
    when it stays, so the leader epoch rises and the dropped replicas are fenced.
    New replicas always come with their directories (Kafka's rule)."""
    shrinks = not set(p.replicas) <= set(replicas)
    same_dirs = directories == p.directories or (
        not p.directories and all(d == dirs.UNASSIGNED for d in directories))
    record = PartitionChangeRecord(
        partition_id=p.partition, topic_id=topic_id,
        isr=None if isr == p.isr else list(isr),
        leader=leader if leader != p.leader or shrinks else NO_LEADER_CHANGE,
        replicas=None if replicas == p.replicas else list(replicas),
        adding_replicas=None if adding == p.adding_replicas else list(adding),
        removing_replicas=None if removing == p.removing_replicas else list(removing),
        directories=None if same_dirs and replicas == p.replicas else list(directories),
    )
    if (record.isr is None and record.leader == NO_LEADER_CHANGE and record.replicas is None
            and record.adding_replicas is None and record.removing_replicas is None
            and record.directories is None):
        return None
    return record


def _settle(topic: TopicImage, p: PartitionImage, live: set[int], unclean: bool, *,
            isr: list[int] | None = None, replicas: list[int] | None = None,
            adding: list[int] | None = None, removing: list[int] | None = None,
            leader: int | None = None, homes: dict[int, uuid.UUID] | None = None,
            lost: set[int] | None = None) -> PartitionChangeRecord | None:
    """The record for a partition whose ISR, replicas or reassignment become the
    given ones (None: as they are): it completes the reassignment if it can, then
    keeps the leader if it is still a live ISR member (or takes ``leader``),
    else elects one (module docstring). ``lost`` replicas just lost their log
    (they leave the ISR, their directory becomes LOST); ``homes`` are the
    brokers' directories for new (or recovered) replicas."""
    isr = list(p.isr if isr is None else isr)
    replicas = list(p.replicas if replicas is None else replicas)
    adding = list(p.adding_replicas if adding is None else adding)
    removing = list(p.removing_replicas if removing is None else removing)
    current = dirs.directory_map(p)
    for r in lost or ():
        current[r] = dirs.LOST
    isr = [r for r in isr if r not in (lost or ())]
    if adding or removing:
        kept_isr = [r for r in isr if r not in removing]
        target = [r for r in replicas if r not in removing]
        if kept_isr and target and set(target) <= set(kept_isr):
            isr, replicas, adding, removing = kept_isr, target, [], []
    gone = {r for r in replicas if current.get(r) == dirs.LOST and r not in isr}
    electable = live - gone if gone != set(replicas) else live  # every copy lost: take one
    if leader is None:
        leader = p.leader
        if not (leader in isr and leader in electable and leader in replicas):
            leader = next((r for r in replicas if r in isr and r in electable), NO_LEADER)
            if leader == NO_LEADER and (unclean or gone == set(replicas)):
                leader = next((r for r in replicas if r in electable), NO_LEADER)
                if leader != NO_LEADER:
                    isr = [leader]
    directories = dirs.directories_for(replicas, current, homes or {}, isr)
    return _record(topic.topic_id, p, leader=leader, isr=isr, replicas=replicas, adding=adding,
                   removing=removing, directories=directories)


def _partition(image: MetadataImage, topic: str | uuid.UUID,
               partition: int) -> tuple[TopicImage | None, PartitionImage | None]:
    name = image.by_id.get(topic) if isinstance(topic, uuid.UUID) else topic
    t = image.topics.get(name) if name is not None else None
    return t, (t.partitions.get(partition) if t is not None else None)


def _unknown(t: TopicImage | None, topic: str | uuid.UUID, partition: int) -> Outcome:
    """UNKNOWN_TOPIC_ID for a topic id not in the image, else
    UNKNOWN_TOPIC_OR_PARTITION."""
    if t is None and isinstance(topic, uuid.UUID):
        return Outcome.fail(ErrorCode.UNKNOWN_TOPIC_ID, f"Topic id {topic} does not exist.")
    return Outcome.fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Partition {topic}-{partition} does not exist.")


# -- broker lifecycle ---------------------------------------------------------------


def on_broker_fenced(image: MetadataImage, node_id: int) -> list[Any]:
    """Records for the partitions of a broker being fenced (or shutting down):
    it leaves every ISR it is in, unless it is the last member; where it led,
    the first live ISR replica in assignment order takes over, else (unclean
    election on) the first live replica with the ISR reduced to it, else the
    leader becomes -1 and the ISR stays as it was. One record per partition."""
    live = live_brokers(image) - {node_id}
    home = dirs.homes(image)
    records: list[Any] = []
    for topic in image.topics.values():
        unclean = unclean_election_enabled(image, topic.name)
        for p in topic.partitions.values():
            if node_id not in p.isr and p.leader != node_id:
                continue
            record = _settle(topic, p, live, unclean, homes=home,
                             isr=[r for r in p.isr if r != node_id] or list(p.isr))
            if record is not None and record.leader == NO_LEADER:
                record = _settle(topic, p, live, unclean=False, homes=home)
            if record is not None:
                records.append(record)
    return records


def on_replicas_lost(image: MetadataImage, node_id: int,
                     log_dirs: Sequence[uuid.UUID]) -> list[Any]:
    """Records for a broker registering without the directory some of its
    replicas lived in (:func:`odradek.metadata.directories.lost_on_registration`):
    each such replica becomes LOST and leaves the ISR, even as its last member;
    where it led, a live ISR member takes over, else the partition has no
    leader (unclean election on: the first live replica that is not LOST)."""
    live = live_brokers(image) - {node_id}
    home = dirs.homes(image)
    records: list[Any] = []
    for name, index in dirs.lost_on_registration(image, node_id, log_dirs):
        topic = image.topics[name]
        record = _settle(topic, topic.partitions[index], live,
                         unclean_election_enabled(image, name), homes=home, lost={node_id})
        if record is not None:
            records.append(record)
    return records


def on_broker_live(image: MetadataImage, node_id: int) -> list[Any]:
    """Records for a broker becoming live (unfenced, or registered): each
    partition without a leader elects one, with this broker counted live, so
    the partitions whose ISR holds it are led by it again; with unclean election
    on, a leaderless partition whose ISR has no live member takes its first live
    replica as leader and sole ISR member."""
    return _elect_leaderless(image, live_brokers(image) | {node_id})


def on_controller_active(image: MetadataImage) -> list[Any]:
    """Records for a controller that just became active: every partition
    without a leader whose ISR holds a live broker elects one (with unclean
    election on, as :func:`on_broker_live`). Fencing and unfencing are
    committed in several entries; a leadership change part-way can lose the
    later ones, and nothing else would elect those partitions' leaders."""
    return _elect_leaderless(image, live_brokers(image))


def _elect_leaderless(image: MetadataImage, live: set[int]) -> list[Any]:
    home = dirs.homes(image)
    records: list[Any] = []
    for topic in image.topics.values():
        unclean = unclean_election_enabled(image, topic.name)
        for p in topic.partitions.values():
            if p.leader == NO_LEADER and _may_settle(p, live):
                record = _settle(topic, p, live, unclean, homes=home)
                if record is not None:
                    records.append(record)
    return records


def _may_settle(p: PartitionImage, live: set[int]) -> bool:
    """False when :func:`_settle` is sure to find nothing to change for a
    partition without a leader: none of its replicas is live, so none can be
    elected, and nothing else it settles (a reassignment to complete, a LOST
    or missing directory) is pending. A cluster restarting with 100k
    partitions asks this of every leaderless partition at each broker's
    registration; most are another broker's."""
    return (not live.isdisjoint(p.replicas) or bool(p.adding_replicas)
            or bool(p.removing_replicas) or len(p.directories) != len(p.replicas)
            or dirs.LOST in p.directories)


# -- AlterPartition -----------------------------------------------------------------


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> Outcome:
    """STALE_BROKER_EPOCH if the sender is not registered, or (when it sends an
    epoch other than -1) is registered with another epoch. Kafka checks this once
    per AlterPartition request, before any partition (the top-level error)."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return Outcome.fail(ErrorCode.STALE_BROKER_EPOCH,
                            f"No broker registration found for broker id {broker_id}")
    if broker_epoch != -1 and broker_epoch != broker.epoch:
        return Outcome.fail(ErrorCode.STALE_BROKER_EPOCH,
                            f"Expected broker epoch {broker.epoch}, but got {broker_epoch}")
    return Outcome()


def alter_partition(
    image: MetadataImage, broker_id: int, broker_epoch: int, topic: str | uuid.UUID,
    partition: int, leader_epoch: int, partition_epoch: int, new_isr: Sequence[int],
    member_epochs: Mapping[int, int] | None = None,
) -> tuple[Outcome, PartitionState | None]:
    """A leader's request to change one partition's ISR (``topic`` by name, or by
    id for AlterPartition v2+). ``member_epochs`` are the broker epochs of v3's
    ``NewIsrWithEpochs`` (-1 or absent: not checked). Checked in Kafka's order:

    0. the sender's broker epoch (:func:`check_broker_epoch`) → STALE_BROKER_EPOCH;
    1. unknown partition → UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an
       unknown topic id);
    2. leader or partition epoch above the image's → NOT_CONTROLLER (this
       controller is behind);
    3. leader epoch below → FENCED_LEADER_EPOCH;
    4. sender not the leader → INVALID_REQUEST;
    5. partition epoch below → INVALID_UPDATE_VERSION;
    6. new ISR empty, with duplicates, not within the replicas or without the
       leader → INVALID_REQUEST;
    7. a member joining the ISR unregistered, fenced or with another broker epoch
       → INELIGIBLE_REPLICA (the leader then keeps its committed ISR).

    Then one PartitionChangeRecord setting the ISR (no record if it is the same),
    which also completes a reassignment the new ISR allows. Returns the outcome
    and the partition as it is once the records are replayed (None on error).
    """
    outcome = check_broker_epoch(image, broker_id, broker_epoch)
    if outcome.error:
        return outcome, None
    t, p = _partition(image, topic, partition)
    if t is None or p is None:
        return _unknown(t, topic, partition), None
    name = f"{t.name}-{partition}"
    if leader_epoch > p.leader_epoch or partition_epoch > p.partition_epoch:
        return Outcome.fail(
            ErrorCode.NOT_CONTROLLER,
            f"{name} is at leader epoch {p.leader_epoch} and partition epoch "
            f"{p.partition_epoch} here, behind the request's {leader_epoch}/{partition_epoch}",
        ), None
    if leader_epoch < p.leader_epoch:
        return Outcome.fail(ErrorCode.FENCED_LEADER_EPOCH,
                            f"{name} is at leader epoch {p.leader_epoch}, not {leader_epoch}"), None
    if broker_id != p.leader:
        return Outcome.fail(ErrorCode.INVALID_REQUEST,
                            f"Broker {broker_id} does not lead {name} (leader {p.leader})"), None
    if partition_epoch < p.partition_epoch:
        return Outcome.fail(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"{name} is at partition epoch {p.partition_epoch}, not {partition_epoch}",
        ), None
    isr = list(new_isr)
    if (not isr or len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas)
            or p.leader not in isr):
        return Outcome.fail(
            ErrorCode.INVALID_REQUEST,
            f"Invalid ISR {isr} for {name}: it must be distinct replicas of {p.replicas} "
            f"including the leader {p.leader}",
        ), None
    for member in isr:
        why = None if member in p.isr else _ineligible(image, member, member_epochs or {})
        if why:
            return Outcome.fail(ErrorCode.INELIGIBLE_REPLICA,
                                f"Replica {member} cannot join the ISR of {name}: {why}"), None
    record = _settle(t, p, live_brokers(image), unclean=False, isr=isr, homes=dirs.homes(image))
    after = _copy(p)
    if record is not None:
        after.apply(record)
    state = PartitionState(after.leader, after.leader_epoch, list(after.isr),
                           after.partition_epoch)
    return Outcome(records=[record] if record is not None else []), state


def _ineligible(image: MetadataImage, member: int, epochs: Mapping[int, int]) -> str | None:
    """Why ``member`` may not join an ISR, or None if it may."""
    broker = image.brokers.get(member)
    if broker is None:
        return "not registered"
    if broker.fenced:
        return "fenced"
    expected = epochs.get(member, -1)
    if expected not in (-1, broker.epoch):
        return f"broker epoch {broker.epoch}, not {expected}"
    return None


# -- elections ----------------------------------------------------------------------


def elect_leaders(
    image: MetadataImage, election_type: int, partitions: Iterable[tuple[str, int]] | None,
) -> tuple[dict[tuple[str, int], tuple[ErrorCode, str | None]], Outcome]:
    """ElectLeaders. PREFERRED (0): the first replica becomes leader if it is a
    live ISR member (already leader: ELECTION_NOT_NEEDED; otherwise
    PREFERRED_LEADER_NOT_AVAILABLE). UNCLEAN (1), for leaderless partitions only
    (one with a leader: ELECTION_NOT_NEEDED): the first live ISR member in
    assignment order, else the first live replica with the ISR reduced to it
    (none live: ELIGIBLE_LEADERS_NOT_AVAILABLE). An unknown partition answers
    UNKNOWN_TOPIC_OR_PARTITION; another type fails the whole request with
    INVALID_REQUEST. ``partitions`` None means every partition, and then those
    that need no election are left out of the answer."""
    if election_type not in (PREFERRED, UNCLEAN):
        return {}, Outcome.fail(ErrorCode.INVALID_REQUEST,
                                f"Unknown election type {election_type}")
    everything = partitions is None
    if partitions is None:
        partitions = [(t.name, p) for t in image.topics.values() for p in t.partitions]
    live = live_brokers(image)
    home = dirs.homes(image)
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    records: list[Any] = []
    for key in partitions:
        if key in results:
            continue
        t, p = _partition(image, *key)
        if t is None or p is None:
            results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Partition {key[0]}-{key[1]} does not exist.")
            continue
        error, record = _elect(t, p, election_type, live, home)
        if record is not None:
            records.append(record)
        if not (everything and error == ErrorCode.ELECTION_NOT_NEEDED):
            results[key] = (error, None if error == ErrorCode.NONE else _ELECTION_MESSAGES[error])
    return results, Outcome(records=records, atomic=False)


_ELECTION_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE:
        "The preferred leader is not live or not in the in-sync replicas.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No replica of the partition is live.",
}


def _elect(t: TopicImage, p: PartitionImage, election_type: int, live: set[int],
           home: dict[int, uuid.UUID]) -> tuple[ErrorCode, PartitionChangeRecord | None]:
    if election_type == PREFERRED:
        preferred = p.replicas[0] if p.replicas else NO_LEADER
        if p.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        if preferred not in live or preferred not in p.isr:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
        return ErrorCode.NONE, _settle(t, p, live, unclean=False, leader=preferred, homes=home)
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    record = _settle(t, p, live, unclean=True, homes=home)
    if record is None or record.leader in (NO_LEADER, NO_LEADER_CHANGE):
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ErrorCode.NONE, record


def preferred_imbalance(image: MetadataImage) -> list[tuple[str, int]]:
    """Partitions a preferred election would move (``auto.leader.rebalance.enable``):
    led by another broker than their first replica, which is live and in the ISR."""
    live = live_brokers(image)
    return [
        (t.name, p.partition)
        for t in image.topics.values() for p in t.partitions.values()
        if p.replicas and p.leader != p.replicas[0]
        and p.replicas[0] in live and p.replicas[0] in p.isr
    ]


# -- reassignment (KIP-455) -----------------------------------------------------------


def alter_reassignment(image: MetadataImage, topic: str, partition: int,
                       target: Sequence[int] | None) -> Outcome:
    """AlterPartitionReassignments for one partition.

    A target (non-empty, distinct, registered brokers, else
    INVALID_REPLICA_ASSIGNMENT) starts a reassignment from the current replicas
    (during another one: all of them, so it is replaced): adding = target less
    current, removing = current less target, replicas = target then removing.
    It completes at once when the ISR allows (module docstring), e.g. a reorder.
    Nothing to do, no record. None cancels the one under way
    (NO_REASSIGNMENT_IN_PROGRESS if none): the adding replicas leave the replicas
    and the ISR; if that empties the ISR, the first remaining replica becomes the
    ISR, which needs unclean election on (else INVALID_REPLICA_ASSIGNMENT).
    Unknown partition: UNKNOWN_TOPIC_OR_PARTITION."""
    t, p = _partition(image, topic, partition)
    if t is None or p is None:
        return _unknown(t, topic, partition)
    live = live_brokers(image)
    unclean = unclean_election_enabled(image, topic)
    if target is None:
        if not p.adding_replicas and not p.removing_replicas:
            return Outcome.fail(
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"No partition reassignment is in progress for {topic}-{partition}.",
            )
        replicas = [r for r in p.replicas if r not in p.adding_replicas]
        isr = [r for r in p.isr if r not in p.adding_replicas]
        if not isr:
            if not unclean:
                return Outcome.fail(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert the reassignment of {topic}-{partition}: it would "
                    "need an unclean leader election.",
                )
            isr = replicas[:1]
        record = _settle(t, p, live, unclean, isr=isr, replicas=replicas, adding=[], removing=[],
                         homes=dirs.homes(image))
        return Outcome(records=[record] if record is not None else [])
    wanted = list(target)
    if not wanted:
        return Outcome.fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            "The manual partition assignment includes an empty replica list.")
    if len(set(wanted)) != len(wanted):
        return Outcome.fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"The manual partition assignment {wanted} repeats a broker.")
    for broker in wanted:
        if broker not in image.brokers:
            return Outcome.fail(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, "
                "but no such broker is registered.",
            )
    removing = sorted(set(p.replicas) - set(wanted))
    adding = sorted(set(wanted) - set(p.replicas))
    record = _settle(t, p, live, unclean, replicas=wanted + removing, adding=adding,
                     removing=removing, homes=dirs.homes(image))
    return Outcome(records=[record] if record is not None else [])


def complete_reassignments(image: MetadataImage) -> Outcome:
    """Records completing every reassignment the ISR now allows (module
    docstring). The decisions here already complete what their own change
    allows; this sweep catches the rest (e.g. an image replayed from records
    written by something else)."""
    live = live_brokers(image)
    home = dirs.homes(image)
    records: list[Any] = []
    for t in image.topics.values():
        unclean = unclean_election_enabled(image, t.name)
        for p in t.partitions.values():
            if p.adding_replicas or p.removing_replicas:
                record = _settle(t, p, live, unclean, homes=home)
                if record is not None:
                    records.append(record)
    return Outcome(records=records)


def list_reassignments(image: MetadataImage) -> list[OngoingReassignment]:
    """The reassignments under way, by topic then partition."""
    return [
        OngoingReassignment(t.name, p.partition, list(p.replicas), list(p.adding_replicas),
                            list(p.removing_replicas))
        for t in sorted(image.topics.values(), key=lambda t: t.name)
        for p in sorted(t.partitions.values(), key=lambda p: p.partition)
        if p.adding_replicas or p.removing_replicas
    ]

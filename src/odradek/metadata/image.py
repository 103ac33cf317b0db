"""The cluster metadata image: brokers, topics, partitions and configs, built by replay.

Only :meth:`MetadataImage.replay` changes the image; it takes the generated
classes of Kafka's metadata records (``odradek.wire.internal``). Start-up replays
the ``__cluster_metadata`` log, so what the controller wrote is what is served.
Invariant: partition ids of a topic are 0..n-1 with none missing.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.common.intern import Interner
from odradek.metadata import acl_changes
from odradek.metadata import quotas as quota_model
from odradek.metadata import scram as scram_model
from odradek.metadata.acls import AclStore
from odradek.wire.internal.access_control_entry_record import AccessControlEntryRecord
from odradek.wire.internal.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from odradek.wire.internal.client_quota_record import ClientQuotaRecord
from odradek.wire.internal.config_record import ConfigRecord
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.internal.fence_broker_record import FenceBrokerRecord
from odradek.wire.internal.partition_change_record import PartitionChangeRecord
from odradek.wire.internal.partition_record import PartitionRecord
from odradek.wire.internal.producer_ids_record import ProducerIdsRecord
from odradek.wire.internal.register_broker_record import RegisterBrokerRecord
from odradek.wire.internal.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from odradek.wire.internal.remove_topic_record import RemoveTopicRecord
from odradek.wire.internal.topic_record import TopicRecord
from odradek.wire.internal.unfence_broker_record import UnfenceBrokerRecord
from odradek.wire.internal.unregister_broker_record import UnregisterBrokerRecord

_BROKER_RECORDS = (RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord,
                   UnfenceBrokerRecord, UnregisterBrokerRecord)
"""Records that change a broker's registration or liveness: no topic's
partitions or configs (elections are PartitionChangeRecords of their own), but
what readers derive from a topic and the brokers together (offline replicas)."""
_TOPICLESS = (ProducerIdsRecord, ClientQuotaRecord, AccessControlEntryRecord,
              RemoveAccessControlEntryRecord, FeatureLevelRecord, *_BROKER_RECORDS)
"""Records whose replay changes no topic's partitions or configs."""

T = TypeVar("T")

TOPIC_RESOURCE = 2
FENCE, UNFENCE = 1, -1
"""BrokerRegistrationChangeRecord's ``Fenced``: fence, unfence (0: no change), the
record Kafka's controller writes for both since metadata version 3.3."""
BROKER_RESOURCE = 4


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: int = 0
    """0: PLAINTEXT (Kafka's SecurityProtocol ids)."""


@dataclass(slots=True)
class BrokerImage:
    """A registered broker (RegisterBrokerRecord), fenced until unfenced."""

    node_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: list[Endpoint]
    rack: str | None = None
    fenced: bool = True
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    """The ids of its log directories, as it registered them (KIP-858)."""

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (or the first one)."""
        for e in self.endpoints:
            if listener is None or e.listener == listener:
                return e
        return None


_LISTS: Interner[tuple[Any, ...], list[Any]] = Interner(list)


def shared_list(values: Iterable[T]) -> list[T]:
    """The one list of these values (broker ids, directory ids) that every
    partition image with the same ones holds: a broker with 100k partitions
    has a handful of distinct replica sets, ISRs and directory lists, and a
    list costs 56-90 bytes. The lists of an image are never changed in place
    (:meth:`PartitionImage.apply` and the replay put new ones; images share
    them with :meth:`MetadataImage.replayed`'s copies already), so sharing
    them is safe as long as nobody does; nobody may
    (:mod:`odradek.common.intern`)."""
    return _LISTS(tuple(values))


@dataclass(slots=True)
class PartitionImage:
    partition: int
    replicas: list[int]
    """The assignment, preferred leader first; during a reassignment (KIP-455) the
    target replicas followed by those being removed."""
    isr: list[int]
    leader: int
    """-1: no leader."""
    leader_epoch: int
    partition_epoch: int
    adding_replicas: list[int] = field(default_factory=list)
    """Replicas a reassignment is adding (empty when none is under way)."""
    removing_replicas: list[int] = field(default_factory=list)
    """Replicas a reassignment is removing (empty when none is under way)."""
    directories: list[uuid.UUID] = field(default_factory=list)
    """The log directory of each replica, aligned with :attr:`replicas` (empty:
    not known; :mod:`odradek.metadata.directories`)."""

    def apply(self, record: PartitionChangeRecord) -> None:
        """Apply a PartitionChangeRecord: null fields (leader -2) change nothing;
        any leader, even the same one or -1, bumps the leader epoch; every record
        bumps the partition epoch."""
        if record.leader != -2:
            self.leader = record.leader
            self.leader_epoch += 1
        if record.isr is not None:
            self.isr = shared_list(record.isr)
        if record.replicas is not None:
            self.replicas = shared_list(record.replicas)
        if record.adding_replicas is not None:
            self.adding_replicas = shared_list(record.adding_replicas)
        if record.removing_replicas is not None:
            self.removing_replicas = shared_list(record.removing_replicas)
        if record.directories is not None:
            self.directories = shared_list(record.directories)
        self.partition_epoch += 1


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class MetadataImage:
    brokers: dict[int, BrokerImage] = field(default_factory=dict)
    """Registered brokers by node id; a registration replaces the one before."""
    topics: dict[str, TopicImage] = field(default_factory=dict)
    by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Dynamic broker configs by resource name: ``""`` the cluster default, else a
    node id (``"1"``); ConfigRecords of resource type BROKER."""
    pending_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    client_quotas: quota_model.Quotas = field(default_factory=dict)
    """Client quotas by entity (:mod:`odradek.metadata.quotas`)."""
    next_producer_id: int = 0
    """Every producer id below this one has been handed out (never reused)."""
    features: dict[str, int] = field(default_factory=dict)
    """Finalized feature levels (FeatureLevelRecord), e.g. ``metadata.version``;
    a level 0 record is kept as 0 (``odradek.metadata.features.finalized``
    leaves it out). A snapshot writes ``metadata.version`` first."""
    scram: scram_model.ScramCredentials = field(default_factory=scram_model.ScramCredentials)
    """SCRAM credentials by user and mechanism (:mod:`odradek.metadata.scram`)."""
    static_configs: dict[str, str] = field(default_factory=dict)
    """This node's own ``server.properties`` values that controller decisions fall
    back on after the topic's and the dynamic configs (e.g.
    ``unclean.leader.election.enable``). Not replicated and never replayed: the
    process that holds the image sets it."""
    acls: AclStore = field(default_factory=AclStore)
    """ACL bindings by id, indexed for the authorizer (:mod:`odradek.metadata.acls`)."""
    derived: dict[str, Any] = field(default_factory=dict)
    """Values computed from the image by readers (e.g. the Metadata answer for all
    topics); emptied by every replay, so an entry is never stale."""
    topic_derived: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    """Values computed from one topic by readers (e.g. its part of a Metadata
    answer), by topic name: a replay empties those of the topics its record
    touches (:meth:`topics_touched`), or all of them when it may touch every
    topic, so an entry is never stale and an untouched topic keeps its own."""

    def live_brokers(self) -> int:
        """How many registered brokers are not fenced."""
        return sum(1 for b in self.brokers.values() if not b.fenced)

    def replay(self, record: Any) -> None:
        self.derived.clear()
        if self.topic_derived:
            names = self.topics_touched(record)
            if names is None or isinstance(record, _BROKER_RECORDS):
                self.topic_derived.clear()
            else:
                for name in names:
                    self.topic_derived.pop(name, None)
        if isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerImage(
                record.broker_id, record.broker_epoch, record.incarnation_id,
                [Endpoint(e.name, e.host, e.port, e.security_protocol)
                 for e in record.end_points],
                record.rack, record.fenced, list(record.log_dirs or ()),
            )
        elif isinstance(record, BrokerRegistrationChangeRecord):
            broker = self.brokers.get(record.broker_id)
            if broker is not None and broker.epoch == record.broker_epoch:
                if record.fenced in (FENCE, UNFENCE):
                    broker.fenced = record.fenced == FENCE
                if record.log_dirs:
                    broker.log_dirs = list(record.log_dirs)
        elif isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):  # older logs
            broker = self.brokers.get(record.id)
            if broker is not None and broker.epoch == record.epoch:
                broker.fenced = isinstance(record, FenceBrokerRecord)
        elif isinstance(record, UnregisterBrokerRecord):
            self.brokers.pop(record.broker_id, None)
        elif isinstance(record, TopicRecord):
            topic = TopicImage(record.name, record.topic_id)
            topic.configs.update(self.pending_configs.pop(record.name, {}))
            self.topics[record.name] = topic
            self.by_id[record.topic_id] = record.name
        elif isinstance(record, PartitionRecord):
            t = self.topics[self.by_id[record.topic_id]]
            t.partitions[record.partition_id] = PartitionImage(
                record.partition_id, shared_list(record.replicas), shared_list(record.isr),
                record.leader, record.leader_epoch, record.partition_epoch,
                shared_list(record.adding_replicas or ()),
                shared_list(record.removing_replicas or ()),
                shared_list(record.directories or ()),
            )
        elif isinstance(record, PartitionChangeRecord):
            self.topics[self.by_id[record.topic_id]].partitions[record.partition_id].apply(record)
        elif isinstance(record, ConfigRecord):
            self._replay_config(record)
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
        elif isinstance(record, ClientQuotaRecord):
            quota_model.replay(self.client_quotas, record)
        elif isinstance(record, FeatureLevelRecord):
            # Level 0 kept too: "off" differs from "no record" for some
            # features (odradek.metadata.features.ABSENT).
            self.features[record.name] = record.feature_level
        elif isinstance(record, RemoveTopicRecord):
            name = self.by_id.pop(record.topic_id)
            del self.topics[name]
        elif isinstance(record, AccessControlEntryRecord):
            self.acls.add(record.id, acl_changes.binding_of(record))
        elif isinstance(record, RemoveAccessControlEntryRecord):
            self.acls.remove(record.id)
        else:
            self.scram.replay(record)

    def replayed(self, records: Sequence[Any]) -> MetadataImage:
        """A new image: this one with ``records`` replayed; this one is unchanged.
        For broker registration changes and partition changes (a controller
        decision looking ahead) the new image shares every topic, partition and
        broker the records leave alone: a deep copy of 100k partitions held the
        controller's loop for seconds, long enough for its followers to start
        an election. Any other record makes it a deep copy."""
        if not all(isinstance(r, (BrokerRegistrationChangeRecord, PartitionChangeRecord))
                   for r in records):
            after = copy.deepcopy(self)
            for record in records:
                after.replay(record)
            return after
        after = dataclasses.replace(self, brokers=dict(self.brokers), topics=dict(self.topics),
                                    derived={}, topic_derived={})
        for record in records:
            if isinstance(record, PartitionChangeRecord):
                name = self.by_id[record.topic_id]
                topic = after.topics[name]
                if topic is self.topics[name]:
                    topic = dataclasses.replace(topic, partitions=dict(topic.partitions))
                    after.topics[name] = topic
                part = topic.partitions[record.partition_id]
                if part is self.topics[name].partitions.get(record.partition_id):
                    topic.partitions[record.partition_id] = copy.copy(part)
            else:
                broker = after.brokers.get(record.broker_id)
                if broker is not None and broker is self.brokers.get(record.broker_id):
                    after.brokers[record.broker_id] = copy.copy(broker)
            after.replay(record)
        return after

    def to_records(self) -> list[Any]:
        """Records whose replay into an empty image rebuilds this one (a metadata
        snapshot): brokers, configs, topics with their partitions, quotas, ACLs and
        the producer-id high mark. Partition and leader epochs, and reassignments under way,
        are kept as they are."""
        from odradek.wire.internal.client_quota_record import EntityData
        from odradek.wire.internal.register_broker_record import BrokerEndpoint

        out: list[Any] = []
        for b in self.brokers.values():
            out.append(RegisterBrokerRecord(
                broker_id=b.node_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
                end_points=[BrokerEndpoint(e.listener, e.host, e.port, e.security_protocol)
                            for e in b.endpoints],
                rack=b.rack, fenced=b.fenced, log_dirs=list(b.log_dirs)))
        for resource, configs in sorted(self.broker_configs.items()):
            out.extend(ConfigRecord(BROKER_RESOURCE, resource, k, v)
                       for k, v in sorted(configs.items()))
        for name, pending in sorted(self.pending_configs.items()):
            out.extend(ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in sorted(pending.items()))
        for t in self.topics.values():
            out.extend(ConfigRecord(TOPIC_RESOURCE, t.name, k, v)
                       for k, v in sorted(t.configs.items()))
            out.append(TopicRecord(name=t.name, topic_id=t.topic_id))
            for p in t.partitions.values():
                out.append(PartitionRecord(
                    partition_id=p.partition, topic_id=t.topic_id, replicas=list(p.replicas),
                    isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                    adding_replicas=list(p.adding_replicas), leader=p.leader,
                    leader_recovery_state=0, leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch, directories=list(p.directories)))
        for entity, values in self.client_quotas.items():
            for quota_key, quota in sorted(values.items()):
                out.append(ClientQuotaRecord(
                    entity=[EntityData(etype, ename) for etype, ename in entity],
                    key=quota_key, value=quota))
        out.extend(FeatureLevelRecord(name, level) for name, level in sorted(
            self.features.items(), key=lambda item: (item[0] != "metadata.version", item[0])))
        out.extend(acl_changes.record_of(acl_id, b) for acl_id, b in self.acls)
        out.extend(self.scram.to_records())
        if self.next_producer_id:
            out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                         next_producer_id=self.next_producer_id))
        return out

    def replay_all(self, records: Iterable[Any]) -> set[str] | None:
        """Replay ``records`` in order; the topics they touched (each record's
        :meth:`topics_touched`, asked just before its replay), or None if one
        of them may have touched every topic."""
        scope = self.replay_scoped(records)
        return None if scope is None else set(scope)

    def replay_scoped(self, records: Iterable[Any]) -> dict[str, set[int] | None] | None:
        """Replay ``records`` in order; what they touched by topic (each
        record's :meth:`topics_touched`, asked just before its replay): the
        partitions PartitionChangeRecords named, or None for a topic another
        record touched whole (its creation, configs, removal); None for all if
        one of them may have touched every topic."""
        scope: dict[str, set[int] | None] | None = {}
        for record in records:
            if scope is not None:
                if isinstance(record, PartitionChangeRecord):
                    name = self.by_id.get(record.topic_id)
                    if name is None:
                        scope = None
                    elif name not in scope:
                        scope[name] = {record.partition_id}
                    else:
                        indexes = scope[name]
                        if indexes is not None:
                            indexes.add(record.partition_id)
                else:
                    names = self.topics_touched(record)
                    if names is None:
                        scope = None
                    else:
                        for name in names:
                            scope[name] = None
            self.replay(record)
        return scope

    def topics_touched(self, record: Any) -> frozenset[str] | None:
        """The topics whose partitions or configs replaying ``record`` may change,
        asked before it is replayed (a RemoveTopicRecord's name is gone after);
        None: it may change what every partition of this node is given (a
        dynamic broker config, a record not known here). Records that touch no
        topic (brokers' registrations and fencing, producer ids, quotas, ACLs,
        SCRAM, features) give the empty set. A broker reconciles only the topics
        named by a batch's records (:meth:`PartitionManager.reconcile`); the
        per-topic caches (:attr:`topic_derived`) are emptied by broker records
        too, since readers combine a topic with the brokers' liveness."""
        if isinstance(record, TopicRecord):
            return frozenset((record.name,))
        if isinstance(record, (PartitionRecord, PartitionChangeRecord, RemoveTopicRecord)):
            name = self.by_id.get(record.topic_id)
            return None if name is None else frozenset((name,))
        if isinstance(record, ConfigRecord):
            if record.resource_type == TOPIC_RESOURCE:
                return frozenset((record.resource_name,))
            return None
        if isinstance(record, _TOPICLESS) or getattr(record, "API_KEY", -1) in (
                scram_model.USER_SCRAM_CREDENTIAL_RECORD,
                scram_model.REMOVE_USER_SCRAM_CREDENTIAL_RECORD):
            return frozenset()
        return None

    def _replay_config(self, record: ConfigRecord) -> None:
        if record.resource_type == BROKER_RESOURCE:
            target = self.broker_configs.setdefault(record.resource_name, {})
        elif record.resource_name in self.topics:
            target = self.topics[record.resource_name].configs
        else:  # configs of a topic precede its TopicRecord in one batch
            target = self.pending_configs.setdefault(record.resource_name, {})
        if record.value is None:
            target.pop(record.name, None)
            if not target and record.resource_type == BROKER_RESOURCE:
                del self.broker_configs[record.resource_name]
        else:
            target[record.name] = record.value

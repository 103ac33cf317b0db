"""The broker's state: configuration, the metadata image and its journal.

Controller decisions (``odradek.metadata.controller``) come back as records;
:meth:`BrokerState.commit` writes them to the metadata journal and only then
replays them into the image, so what is served is always what is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from odradek.broker.config import BrokerConfig, ConfigError, Listener
from odradek.broker.control.journal import decode_record, encode_record
from odradek.broker.control.meta_properties import (
    META_PROPERTIES,
    DataDirError,
    directory_ids,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)
from odradek.broker.net.quotas import QuotaManager
from odradek.broker.replica.partitions import PartitionManager
from odradek.common.clock import Clock, SystemClock
from odradek.common.ids import Ids, RandomIds
from odradek.metadata import controller
from odradek.metadata.broker_configs import DYNAMIC
from odradek.metadata.image import Endpoint, MetadataImage

if TYPE_CHECKING:
    from odradek.broker.control.controller_channel import ControllerChannel
    from odradek.broker.control.quorum_driver import QuorumDriver
    from odradek.broker.replica.partitions import Partition


log = logging.getLogger("odradek.broker")


class NotControllerError(Exception):
    """A metadata write on a node that is not the active controller (cluster mode);
    the caller forwards the request to the controller."""

    def __init__(self, controller_id: int) -> None:
        super().__init__(f"this node is not the active controller (controller: {controller_id})")
        self.controller_id = controller_id


ACCEPT_MISSING_METADATA = "odradek.accept.missing.metadata"
"""Start although the metadata journal is empty and partition directories exist
(``odradek serve --accept-missing-metadata``): they are moved aside as ``-stray``."""


class MetadataJournal(Protocol):
    """Where committed metadata records live (the ``__cluster_metadata`` log)."""

    def append(self, records: list[Any]) -> None: ...

    def replay(self) -> Iterable[Any]: ...

    def close(self) -> None: ...

    def end_offset(self) -> int:
        """The offset the next record gets (DescribeQuorum's high watermark on a
        single node, where every record is committed once written)."""
        ...


class BrokerSessions(Protocol):
    """The active controller's view of broker sessions (broker/control/sessions.py)."""

    def heard(self, broker_id: int) -> None:
        """A heartbeat or registration from ``broker_id``: its session goes on."""
        ...

    async def fence(self, broker_id: int) -> None:
        """Fence ``broker_id`` now (its controlled shutdown)."""
        ...

    async def run(self) -> None:
        """Fence brokers whose session expired, for as long as this node runs."""
        ...


class Decision(Protocol):
    """What a controller call returns: an error code (0: none) and records."""

    @property
    def error(self) -> int: ...

    @property
    def records(self) -> list[Any]: ...


D = TypeVar("D", bound=Decision)


class MemoryJournal:
    """A journal that forgets everything on restart (tests, in-memory brokers)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def append(self, records: list[Any]) -> None:
        self.records.extend(records)

    def replay(self) -> Iterable[Any]:
        return list(self.records)

    def close(self) -> None:
        pass

    def end_offset(self) -> int:
        return len(self.records)


@dataclass(slots=True)
class BrokerState:
    config: BrokerConfig
    journal: MetadataJournal
    cluster_id: str
    clock: Clock
    image: MetadataImage
    advertised: list[Listener]
    partitions: PartitionManager
    ids: Ids = field(default_factory=RandomIds)
    """Where topic ids, member ids and the incarnation id come from."""
    producer_ids: list[int] = field(default_factory=list)
    """Reserved, not yet handed out producer ids (popped from the end)."""
    quotas: QuotaManager | None = None
    """Client quota sensors (set by :meth:`open`)."""
    sessions: BrokerSessions | None = None
    """Cluster mode: broker heartbeats as the active controller sees them."""
    channel: ControllerChannel | None = None
    """Cluster mode: requests to the active controller (built by :meth:`open`;
    None on a single node, which is its own controller)."""
    heartbeats: ControllerChannel | None = None
    """Cluster mode: this broker's registration and heartbeats to the active
    controller, on connections of their own (:func:`heartbeat_channel`)."""
    incarnation: uuid.UUID | None = None
    """This process's registration (a new one at each start)."""
    metadata_ready: bool = True
    """False on a cluster node until its image has caught up with the quorum."""
    quorum: QuorumDriver | None = None
    """Cluster mode: the Raft quorum the metadata log lives in (None: single node,
    metadata in the local journal)."""
    on_config_change: list[Callable[[set[str]], None]] = field(default_factory=list)
    """Called with the names of the broker configs whose effective value a dynamic
    config change moved (the server's connection limits, the replica fetchers)."""
    in_service: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once this process's registration is in the metadata, unfenced, with
    the image caught up (:attr:`registered` first true); never cleared."""
    _writes: asyncio.Lock = field(default_factory=asyncio.Lock)
    """The controller queue: one metadata write at a time, decided on the image
    that the writes before it left."""

    @classmethod
    def open(
        cls,
        config: BrokerConfig,
        journal: MetadataJournal,
        partitions: PartitionManager,
        clock: Clock | None = None,
        ids: Ids | None = None,
    ) -> BrokerState:
        image = MetadataImage()
        replayed = 0
        for record in journal.replay():
            image.replay(record)
            replayed += 1
        cluster_id = config.get("cluster.id") or _cluster_id_from(config)
        if _take_dynamic_configs(config, image):
            partitions.reconfigure(config.props)
        if not config.is_cluster:
            if not replayed:
                _refuse_orphaned_partitions(config, partitions)
            partitions.reconcile(image, remove=False)
        # A cluster node opens no partition until its image has caught up with the
        # quorum (metadata_ready): an image still being replayed would disown them.
        state = cls(config, journal, cluster_id, clock or SystemClock(), image, [], partitions,
                    ids or RandomIds())
        if config.is_cluster:
            from odradek.broker.control.controller_channel import ControllerChannel

            state.channel = ControllerChannel(state)
        state.quotas = QuotaManager(
            lambda: state.image, config.get_int("quota.window.size.seconds") * 1000,
            config.get_int("quota.window.num"))
        return state

    @property
    def node_id(self) -> int:
        return self.config.node_id

    async def register(self) -> None:
        """Register this broker's advertised listeners (at start-up, before serving;
        in cluster mode with the active controller, retrying until it answers)."""
        endpoints = [Endpoint(a.name, a.host, a.port) for a in self.advertised]
        incarnation = self.incarnation = self.ids.uuid()
        if self.quorum is not None:
            await self._register_with_controller(endpoints, incarnation)
            return
        outcome = await self.write(lambda image: controller.register_broker(
            image, self.node_id, endpoints, incarnation))
        if outcome.error:
            raise ConfigError(f"cannot register broker {self.node_id}: {outcome.message}")
        self.in_service.set()  # one node: registered and caught up at once

    async def _register_with_controller(self, endpoints: list[Endpoint],
                                        incarnation: uuid.UUID) -> None:
        from odradek.broker.control.controller_channel import ControllerUnavailable
        from odradek.wire.errors import ErrorCode
        from odradek.wire.messages import broker_registration_request as br

        channel = heartbeat_channel(self)
        request = br.BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=incarnation,
            listeners=[br.Listener(e.listener, e.host, e.port, e.security_protocol)
                       for e in endpoints],
            rack=self.config.get("broker.rack") or None,
            log_dirs=directory_ids(self.config.log_dirs()))
        while True:
            try:
                response = await channel.request(request, 2)
            except ControllerUnavailable:
                response = None
            if response is not None and response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise ConfigError(f"the controller quorum belongs to another cluster than "
                                  f"{self.cluster_id} (format this node with its cluster id)")
            if response is not None and response.error_code in (
                    0, ErrorCode.DUPLICATE_BROKER_REGISTRATION):
                return
            await asyncio.sleep(0.2)

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool:
        """Cluster mode, not the controller: ask the controller to create ``name``
        (as Kafka's brokers do for auto-created and internal topics) and wait until
        the metadata log brings it here. True once it exists."""
        from odradek.broker.control.controller_channel import ControllerUnavailable
        from odradek.wire.messages import create_topics_request as ct

        assert self.channel is not None  # a cluster node's, built at open
        request = ct.CreateTopicsRequest([ct.CreatableTopic(
            name, partitions, replication_factor, [],
            [ct.CreatableTopicConfig(k, v) for k, v in configs.items()],
        )], timeout_ms=10_000)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while name not in self.image.topics and loop.time() < deadline:
            with contextlib.suppress(ControllerUnavailable):
                await self.channel.request(request, 5)
            for _ in range(20):
                if name in self.image.topics:
                    break
                await asyncio.sleep(0.05)
        return name in self.image.topics

    async def producer_ids_from_controller(self) -> range:
        """Cluster mode: a block of producer ids from the controller (AllocateProducerIds)."""
        from odradek.broker.control.controller_channel import (
            ControllerUnavailable,
        )
        from odradek.wire.messages.allocate_producer_ids_request import (
            AllocateProducerIdsRequest,
        )

        assert self.channel is not None  # a cluster node's, built at open
        broker = self.image.brokers.get(self.node_id)
        request = AllocateProducerIdsRequest(self.node_id, broker.epoch if broker else -1)
        for _ in range(100):
            try:
                resp = await self.channel.request(request, 0)
                if not resp.error_code and resp.producer_id_len > 0:
                    return range(resp.producer_id_start,
                                 resp.producer_id_start + resp.producer_id_len)
            except ControllerUnavailable:
                pass
            await asyncio.sleep(0.1)
        raise NotControllerError(self.controller_id)

    @property
    def registered(self) -> bool:
        """Whether this broker may lead partitions: always on one node; in a cluster
        once the metadata holds this process's own registration, unfenced. Until
        then (a restart, before the new registration is applied) the image may
        still name this broker leader at the previous incarnation's epoch, and
        serving from a log that lost its unsynced tail would mislead clients and
        followers."""
        if self.quorum is None:
            return True
        broker = self.image.brokers.get(self.node_id)
        return (self.metadata_ready and broker is not None and not broker.fenced
                and broker.incarnation_id == self.incarnation)

    def serving(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker leads it (cluster mode: a partition whose
        broker was fenced, or that moved, is not served even if its log is here;
        nothing is served before this process's registration is in the metadata)."""
        part = self.partitions.get(topic, index)
        if part is None or self.quorum is None:
            return part
        if not self.registered:
            return None
        t = self.image.topics.get(topic)
        p = t.partitions.get(index) if t is not None else None
        return part if p is not None and p.leader == self.node_id else None

    def missing_partition_error(self, topic: str, index: int) -> int:
        """The error for a partition this node does not host: NOT_LEADER_OR_FOLLOWER
        when another broker leads it (clients refresh metadata and go there),
        else UNKNOWN_TOPIC_OR_PARTITION."""
        from odradek.wire.errors import ErrorCode

        t = self.image.topics.get(topic)
        if (t is not None and index in t.partitions) or not self.registered:
            # Not registered yet: the metadata may be behind, so nothing is
            # "unknown" here; the client refreshes and retries.
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def endpoint_of(self, node_id: int) -> Endpoint | None:
        """The first advertised listener of a live (unfenced) broker."""
        broker = self.image.brokers.get(node_id)
        if broker is None or broker.fenced:
            return None
        name = self.advertised[0].name if self.advertised else None
        return broker.endpoint(name) or broker.endpoint()

    def live_endpoints(self) -> list[tuple[int, Endpoint]]:
        """(node id, endpoint) of every live broker, by node id."""
        out = []
        for node_id in sorted(self.image.brokers):
            endpoint = self.endpoint_of(node_id)
            if endpoint is not None:
                out.append((node_id, endpoint))
        return out

    @property
    def controller_id(self) -> int:
        """The active controller: the quorum's leader (-1: none yet), else this node."""
        return self.quorum.leader_id if self.quorum is not None else self.node_id

    @property
    def client_controller_id(self) -> int:
        """The controller id told to clients (Metadata, DescribeCluster). Clients
        cannot reach a controller-only node, so, as Kafka's KRaft brokers do, they
        are then given a live broker, which forwards what only the controller may
        decide."""
        controller = self.controller_id
        if controller < 0 or self.endpoint_of(controller) is not None:
            return controller
        live = self.live_endpoints()
        return live[0][0] if live else -1

    async def write(self, decide: Callable[[MetadataImage], D], *, apply: bool = True) -> D:
        """The controller queue: run ``decide`` on the current image when every
        earlier write is done, then (unless it failed, or ``apply`` is false: a
        validate-only request) journal its records and replay them, and return
        its decision. This is where the Raft quorum plugs in: the records are
        answered once the quorum has them."""
        async with self._writes:
            quorum = self.quorum
            if quorum is not None and not quorum.is_leader:
                raise NotControllerError(quorum.leader_id)
            decision = decide(self.image)
            if apply and not decision.error:
                if quorum is None:
                    self.commit(decision.records)
                elif decision.records:
                    # Replayed by apply_entry, on this node as on every other.
                    from odradek.broker.control.quorum_driver import CommitLostError
                    from odradek.raft.node import NotLeaderError

                    try:
                        await quorum.propose([encode_record(r) for r in decision.records])
                    except (CommitLostError, NotLeaderError):
                        # Leadership moved first: the records may or may not be
                        # committed by the next leader; the caller answers
                        # NOT_CONTROLLER and the client retries, as with Kafka.
                        raise NotControllerError(quorum.leader_id) from None
            return decision

    def apply_entry(self, offset: int, values: list[bytes]) -> None:
        """Replay one committed entry of the quorum's metadata log (cluster mode)."""
        for value in values:
            self.image.replay(decode_record(value))
        self.apply_broker_configs()
        if self.metadata_ready:
            self.partitions.reconcile(self.image, may_lead=self.registered)
            if not self.in_service.is_set() and self.registered:
                self.in_service.set()

    async def wait_in_service(self, timeout_s: float) -> bool:
        """Until this node is registered and caught up (at most ``timeout_s``):
        a cluster node's first answers to clients wait for it, so a client
        starting with the cluster is given brokers and a controller, not an
        empty list. True at once on one node."""
        if self.in_service.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.in_service.wait(), timeout_s)
        return self.in_service.is_set()

    def on_metadata_ready(self) -> None:
        """The image has caught up with the quorum (:meth:`RaftNode.caught_up`: at
        least a high watermark committed in the current epoch, and at least what
        this node had before it stopped): open this broker's partitions.
        Directories the caught-up image does not know (their topic was deleted,
        or they were reassigned away while the node was down) are moved aside as
        ``-stray``, never deleted (as at a single node's start)."""
        self.metadata_ready = True
        offset = self.quorum.applied if self.quorum is not None else -1
        self.partitions.reconcile(self.image, remove=False, at_offset=offset,
                                  may_lead=self.registered)
        if self.registered:
            self.in_service.set()

    def restore_snapshot(self, payload: bytes) -> None:
        """Start over from a metadata snapshot: the image's records, framed as entries."""
        from odradek.raft.codec import decode_entries

        self.image = MetadataImage()
        for entry in decode_entries(payload):
            for value in entry.records:
                self.image.replay(decode_record(value))
        self.apply_broker_configs()
        if self.metadata_ready:
            self.partitions.reconcile(self.image, may_lead=self.registered)

    def snapshot_payload(self) -> bytes:
        """The image as a metadata snapshot (its records, as batches)."""
        from odradek.raft.codec import encode_entries
        from odradek.raft.log import Entry

        records = tuple(encode_record(r) for r in self.image.to_records())
        chunks = [records[i:i + 500] for i in range(0, len(records), 500)] or [()]
        entries, offset = [], 0
        for chunk in chunks:
            if chunk:
                entries.append(Entry(offset, 0, chunk))
                offset += len(chunk)
        return encode_entries(entries, self.clock.now_ms()) if entries else b""

    def commit(self, records: list[Any]) -> None:
        """Journal and replay ``records`` now (start-up, and :meth:`write`)."""
        if not records:
            return
        self.journal.append(records)
        for record in records:
            self.image.replay(record)
        self.apply_broker_configs()
        self.partitions.reconcile(self.image)

    def apply_broker_configs(self) -> None:
        """Take in the image's dynamic broker configs (the cluster default and this
        node's) and pass what changed to the parts that read them: the topic
        defaults and the cleaner (:meth:`PartitionManager.reconfigure`; the next
        reconcile applies them to the logs), then :attr:`on_config_change`."""
        changed = _take_dynamic_configs(self.config, self.image)
        if not changed:
            return
        log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
        for apply in (lambda _: self.partitions.reconfigure(self.config.props),
                      *self.on_config_change):
            try:
                apply(changed)
            except Exception as exc:  # the records are committed: keep replaying
                log.warning("dynamic broker configs %s not applied: %s",
                            ", ".join(sorted(changed)), exc)


def heartbeat_channel(state: BrokerState) -> ControllerChannel:
    """The channel of ``state``'s registration and heartbeats (made on first use).
    Its calls time out after ``broker.heartbeat.interval.ms`` but at least a
    quarter of ``broker.session.timeout.ms`` (2.25 s with Kafka's defaults), so
    a heartbeat lost to a dead controller is sent again to the next one well
    within the session the controller allows."""
    from odradek.broker.control.controller_channel import ControllerChannel

    if state.heartbeats is None:
        interval = state.config.get_int("broker.heartbeat.interval.ms")
        session = state.config.get_int("broker.session.timeout.ms")
        state.heartbeats = ControllerChannel(state, max(interval, session // 4) / 1000,
                                             name="heartbeat")
    return state.heartbeats


def _take_dynamic_configs(config: BrokerConfig, image: MetadataImage) -> set[str]:
    """Install the image's dynamic broker configs in ``config`` (only the names a
    running broker may change, as Kafka's brokers keep to them); the names whose
    effective value changed."""
    default = {k: v for k, v in image.broker_configs.get("", {}).items() if k in DYNAMIC}
    mine = {k: v for k, v in image.broker_configs.get(str(config.node_id), {}).items()
            if k in DYNAMIC}
    if default == config.dynamic_default and mine == config.dynamic_broker:
        return set()
    return config.set_dynamic(default, mine)


def _refuse_orphaned_partitions(config: BrokerConfig, partitions: PartitionManager) -> None:
    """An empty metadata journal beside partition directories means the journal was
    lost: starting would treat every topic as unknown. Refuse unless told to go on."""
    from odradek.broker.replica.partitions import METADATA_TOPIC

    orphans = sorted(f"{t}-{p}" for t, p in partitions.logs.logs() if t != METADATA_TOPIC)
    if not orphans or config.get(ACCEPT_MISSING_METADATA).lower() == "true":
        return
    shown = ", ".join(orphans[:3]) + (f" and {len(orphans) - 3} more" if len(orphans) > 3 else "")
    raise DataDirError(
        f"{config.metadata_dir}: the metadata journal ({METADATA_TOPIC}-0) is empty or missing but "
        f"{len(orphans)} partition directories exist ({shown}); restore the journal from a "
        f"backup, or start with --accept-missing-metadata to move them aside as -stray "
        f"directories and begin with no topics"
    )


def _cluster_id_from(config: BrokerConfig) -> str:
    """The cluster id in the ``meta.properties`` of the data directories (every
    directory of ``log.dirs``, and ``metadata.log.dir``; format in
    :mod:`odradek.broker.control.meta_properties`), checking that each ``node.id`` is this
    broker's, that they name one cluster, and that no two share a
    ``directory.id`` (KIP-858), as Kafka does.

    A directory without one is formatted here on first start in single-node mode,
    with the cluster id of the others (or a fresh one). A node of a quorum must be
    formatted first (``odradek storage format``): the cluster id has to be the
    same on every node, so no node may invent its own."""
    found: list[tuple[Path, dict[str, str]]] = []
    missing: list[Path] = []
    for directory in config.data_dirs():
        path = directory / META_PROPERTIES
        if not path.exists():
            missing.append(directory)
            continue
        props = read_meta_properties(path)
        stored = props.get("node.id")
        if stored is not None and stored != str(config.node_id):
            raise DataDirError(
                f"{path} belongs to node.id={stored} but this broker has node.id="
                f"{config.node_id}: start it with --override node.id={stored}, or point "
                f"log.dirs at this node's own directory"
            )
        found.append((path, props))
    for (path_a, a), (path_b, b) in itertools.combinations(found, 2):
        if a["cluster.id"] != b["cluster.id"]:
            raise DataDirError(
                f"{path_a} has cluster.id={a['cluster.id']} but {path_b} has cluster.id="
                f"{b['cluster.id']}: every directory of log.dirs must belong to one cluster")
        if a.get("directory.id") and a.get("directory.id") == b.get("directory.id"):
            raise DataDirError(
                f"{path_a} and {path_b} have the same directory.id {a['directory.id']} (one "
                f"was copied from the other): delete one's meta.properties to give it a new id")
    if missing and (config.is_cluster or config.quorum_bootstrap_servers()):
        raise DataDirError(
            f"{missing[0]} is not formatted (no {META_PROPERTIES}) and this node is part "
            f"of a controller quorum: run `odradek storage format -t CLUSTER_ID -c FILE` on "
            f"every node with one id from `odradek storage random-uuid` (--ignore-formatted "
            f"for a directory added later), or set cluster.id"
        )
    cluster_id = found[0][1]["cluster.id"] if found else random_uuid()
    for directory in missing:
        write_meta_properties(directory, cluster_id, config.node_id)
    return cluster_id

"""The broker's metadata service: configuration, the metadata image and its log.

Controller decisions (``odradek.metadata.controller``) come back as records;
:meth:`BrokerState.write` appends them to the metadata log
(broker/control/metadata_log.py) and the image replays them only once the log
has committed them, so what is served is always what is durable. Whether the
log is a single node's journal or the Raft quorum's is chosen once, by the
composition root (broker/app.py), through the :class:`ControlPlane` it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.config import BrokerConfig, ConfigError, Listener
from odradek.broker.control.bootstrap import read_bootstrap
from odradek.broker.control.controller_channel import ControllerChannel, ControllerUnavailable
from odradek.broker.control.controller_stats import ControllerStats
from odradek.broker.control.meta_properties import (
    META_PROPERTIES,
    DataDirError,
    directory_ids,
    random_uuid,
    read_meta_properties,
    write_meta_properties,
)
from odradek.broker.control.metadata_log import MetadataLog
from odradek.broker.net.quotas import QuotaManager
from odradek.broker.net.tls import broker_client_security, controller_listener
from odradek.broker.ports import D, NotControllerError
from odradek.broker.replica.partitions import PartitionManager
from odradek.common.clock import Clock, SystemClock
from odradek.common.ids import Ids, RandomIds
from odradek.metadata import controller
from odradek.metadata.broker_configs import is_dynamic
from odradek.metadata.elections import count_elections
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.metadata.outcome import Outcome

if TYPE_CHECKING:
    from odradek.broker.replica.partitions import Partition
    from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse
    from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
    from odradek.wire.messages.broker_registration_response import (
        BrokerRegistrationResponse,
    )


log = logging.getLogger("odradek.broker")


ACCEPT_MISSING_METADATA = "odradek.accept.missing.metadata"
"""Start although the metadata journal is empty and partition directories exist
(``odradek serve --accept-missing-metadata``): they are moved aside as ``-stray``."""


class BrokerSessions(Protocol):
    """The controller's side of broker registrations and heartbeats: a cluster's
    sessions (broker/control/sessions.py), or a single node's, which takes no
    other broker (:class:`SingleNodeSessions`)."""

    def heard(self, broker_id: int) -> None:
        """A heartbeat or registration from ``broker_id``: its session goes on."""
        ...

    async def fence(self, broker_id: int) -> None:
        """Fence ``broker_id`` now (its controlled shutdown)."""
        ...

    async def run(self) -> None:
        """Fence brokers whose session expired, for as long as this node runs."""
        ...

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        """The answer to a broker's BrokerRegistration (62)."""
        ...

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """The answer to a broker's BrokerHeartbeat (63)."""
        ...


class SingleNodeSessions:
    """A single node is its own controller and takes no other broker: a peer's
    registration or heartbeat is refused (INVALID_REQUEST)."""

    def heard(self, broker_id: int) -> None:
        pass

    async def fence(self, broker_id: int) -> None:
        pass

    async def run(self) -> None:
        pass

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        from odradek.wire.errors import ErrorCode
        from odradek.wire.messages.broker_registration_response import (
            BrokerRegistrationResponse,
        )

        return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        from odradek.wire.errors import ErrorCode
        from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse

        return BrokerHeartbeatResponse(error_code=ErrorCode.INVALID_REQUEST)


class ControlPlane(Protocol):
    """What a single node and a node of a controller quorum build differently;
    the composition root (broker/app.py) picks one and passes it to
    :meth:`BrokerState.open`."""

    def metadata_log(self, state: BrokerState) -> MetadataLog:
        """The metadata log, handing committed records to ``state``."""
        ...

    def sessions(self, state: BrokerState) -> BrokerSessions: ...


@dataclass(slots=True)
class BrokerState:
    """The metadata service: the image, the metadata log it follows, the
    controller queue, and this node's registration. Every service it holds is
    built at construction; none is optional."""

    config: BrokerConfig
    cluster_id: str
    clock: Clock
    image: MetadataImage
    advertised: list[Listener]
    partitions: PartitionManager
    plane: InitVar[ControlPlane]
    ids: Ids = field(default_factory=RandomIds)
    """Where topic ids, member ids and the incarnation id come from."""
    producer_ids: list[int] = field(default_factory=list)
    """Reserved, not yet handed out producer ids (popped from the end)."""
    incarnation: uuid.UUID | None = None
    """This process's registration (a new one at each start)."""
    on_config_change: list[Callable[[set[str]], None]] = field(default_factory=list)
    """Called with the names of the broker configs whose effective value a dynamic
    config change moved (the server's connection limits, the replica fetchers)."""
    on_image: list[Callable[[MetadataImage], None]] = field(default_factory=list)
    """Called with the image after each change once it has caught up (the
    coordinators' metadata fan-out, :meth:`CoordinatorRuntime.on_metadata`)."""
    in_service: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once this process's registration is in the metadata, unfenced, with
    the image caught up (:attr:`registered` first true); never cleared."""
    metadata: MetadataLog = field(init=False)
    """The metadata log (broker/control/metadata_log.py)."""
    metadata_ready: bool = field(init=False)
    """False until the image has caught up with the metadata log (a cluster node,
    while it replays the quorum's); true from the start on a single node."""
    sessions: BrokerSessions = field(init=False)
    """Broker registrations and heartbeats as the controller takes them."""
    channel: ControllerChannel = field(init=False)
    """Requests to the active controller (on a single node, which is its own
    controller, nothing is ever sent: a call fails with ControllerUnavailable)."""
    heartbeats: ControllerChannel = field(init=False)
    """This broker's registration and heartbeats to the active controller, on
    connections of their own. Its calls time out after
    ``broker.heartbeat.interval.ms`` but at least a quarter of
    ``broker.session.timeout.ms`` (2.25 s with Kafka's defaults), so a heartbeat
    lost to a dead controller is sent again to the next one well within the
    session the controller allows."""
    quotas: QuotaManager = field(init=False)
    """Client quota sensors."""
    _writes: asyncio.Lock = field(default_factory=asyncio.Lock)
    """The controller queue: one metadata write at a time, decided on the image
    that the writes before it left."""
    controller_stats: ControllerStats = field(default_factory=ControllerStats)
    """The controller queue's timings and leader elections (for the metrics)."""
    _reconciled_may_lead: bool = field(default=True, init=False)
    """``may_lead`` of the last reconcile: when it flips, every partition is
    reconciled again, not only those of the topics a batch names."""

    def __post_init__(self, plane: ControlPlane) -> None:
        config = self.config
        self.metadata = plane.metadata_log(self)
        self.metadata_ready = self.metadata.is_local
        self.sessions = plane.sessions(self)
        # TLS towards the controllers' listener (built only when a quorum is
        # configured: a single node has no controller to reach).
        security = (broker_client_security(config, controller_listener(config))
                    if config.is_cluster else None)
        self.channel = ControllerChannel(self.metadata, self.node_id, security=security)
        interval = config.get_int("broker.heartbeat.interval.ms")
        session = config.get_int("broker.session.timeout.ms")
        self.heartbeats = ControllerChannel(self.metadata, self.node_id,
                                            max(interval, session // 4) / 1000, name="heartbeat",
                                            security=security)
        self.quotas = QuotaManager(
            lambda: self.image, config.get_int("quota.window.size.seconds") * 1000,
            config.get_int("quota.window.num"))

    @classmethod
    def open(
        cls,
        config: BrokerConfig,
        partitions: PartitionManager,
        plane: ControlPlane,
        clock: Clock | None = None,
        ids: Ids | None = None,
    ) -> BrokerState:
        cluster_id = config.get("cluster.id") or _cluster_id_from(config)
        state = cls(config, cluster_id, clock or SystemClock(), MetadataImage(), [], partitions,
                    plane, ids or RandomIds())
        state.image.static_configs = state.static_configs()  # before dynamic configs apply
        replayed = 0
        for record in state.metadata.replay():
            state.image.replay(record)
            replayed += 1
        if _take_dynamic_configs(config, state.image):
            partitions.reconfigure(config.props)
        # A cluster node opens no partition until its image has caught up with the
        # quorum (metadata_ready): an image still being replayed would disown them.
        if state.metadata_ready:
            if not replayed:
                _refuse_orphaned_partitions(config, partitions)
            partitions.reconcile(state.image, remove=False)
        return state

    @property
    def node_id(self) -> int:
        return self.config.node_id

    async def register(self) -> None:
        """Register this broker's advertised listeners (at start-up, before serving;
        in cluster mode with the active controller, retrying until it answers)."""
        endpoints = [Endpoint(a.name, a.host, a.port) for a in self.advertised]
        incarnation = self.incarnation = self.ids.uuid()
        if not self.metadata.is_local:
            await self._register_with_controller(endpoints, incarnation)
            return
        # A new node's first records also carry its feature levels and what
        # `storage format` left for it (as a cluster's first controller writes them).
        try:
            bootstrap = [] if self.image.brokers else controller.new_cluster_features(
                read_bootstrap(self.config.metadata_dir))
        except ValueError as exc:
            raise DataDirError(str(exc)) from None
        # The epoch is the registration's offset: decided on the log's end, which
        # is where the append that follows the decision puts the records.
        outcome = await self.write(lambda image: _with(controller.register_broker(
            image, self.node_id, endpoints, incarnation,
            at_offset=self.metadata.next_offset()), bootstrap))
        if outcome.error:
            raise ConfigError(f"cannot register broker {self.node_id}: {outcome.message}")
        self.in_service.set()  # one node: registered and caught up at once

    async def _register_with_controller(self, endpoints: list[Endpoint],
                                        incarnation: uuid.UUID) -> None:
        from odradek.wire.errors import ErrorCode
        from odradek.wire.messages import broker_registration_request as br

        channel = self.heartbeats
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
                if not response.error_code:
                    log.info("broker %d registered with the controller: broker epoch %d",
                             self.node_id, response.broker_epoch)
                return
            await asyncio.sleep(0.2)

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool:
        """Cluster mode, not the controller: ask the controller to create ``name``
        (as Kafka's brokers do for auto-created and internal topics) and wait until
        the metadata log brings it here. True once it exists."""
        from odradek.wire.messages import create_topics_request as ct

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
        from odradek.wire.messages.allocate_producer_ids_request import (
            AllocateProducerIdsRequest,
        )

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
        if self.metadata.is_local:
            return True
        broker = self.image.brokers.get(self.node_id)
        return (self.metadata_ready and broker is not None and not broker.fenced
                and broker.incarnation_id == self.incarnation)

    def serving(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker leads it (cluster mode: a partition whose
        broker was fenced, or that moved, is not served even if its log is here;
        nothing is served before this process's registration is in the metadata)."""
        part = self.partitions.get(topic, index)
        if part is None or self.metadata.is_local:
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

    def endpoint_of(self, node_id: int, listener: str = "") -> Endpoint | None:
        """A live (unfenced) broker's endpoint on ``listener`` (the one a client
        came in on: Kafka answers with the endpoints of that listener, so a TLS
        client is sent to TLS ports), else on this node's first advertised
        listener, else its first."""
        broker = self.image.brokers.get(node_id)
        if broker is None or broker.fenced:
            return None
        if listener:
            own = broker.endpoint(listener)
            if own is not None:
                return own
        name = self.advertised[0].name if self.advertised else None
        return broker.endpoint(name) or broker.endpoint()

    def live_endpoints(self, listener: str = "") -> list[tuple[int, Endpoint]]:
        """(node id, endpoint on ``listener``) of every live broker, by node id."""
        out = []
        for node_id in sorted(self.image.brokers):
            endpoint = self.endpoint_of(node_id, listener)
            if endpoint is not None:
                out.append((node_id, endpoint))
        return out

    @property
    def controller_id(self) -> int:
        """The active controller: the quorum's leader (-1: none yet); on a single
        node, this node."""
        return self.metadata.leader_id

    @property
    def client_controller_id(self) -> int:
        """The controller id told to clients (Metadata, DescribeCluster). As
        Kafka's KRaft brokers do (KIP-590: clients never reach the controller
        itself), a live broker, which forwards what only the controller may
        decide: this node once it is a registered, unfenced broker (it is
        answering, so it is alive), else the first live broker (-1: none). Never
        the quorum's leader as such: followers name a leader that has just
        stopped until their fetch timeout, and librdkafka's admin client then
        waits for that dead node (for its whole request timeout) instead of
        asking again. DescribeQuorum names the active controller."""
        if self.metadata.is_local or self.endpoint_of(self.node_id) is not None:
            return self.node_id
        live = self.live_endpoints()
        return live[0][0] if live else -1

    async def write(self, decide: Callable[[MetadataImage], D], *, apply: bool = True) -> D:
        """The controller queue: run ``decide`` on the current image when every
        earlier write is done, then (unless it failed, or ``apply`` is false: a
        validate-only request) append its records to the metadata log, and
        return its decision once they are committed and applied here.
        NotControllerError on a node that is not the active controller."""
        called = time.perf_counter()
        async with self._writes:
            if not self.metadata.is_leader:
                raise NotControllerError(self.metadata.leader_id)
            stats = self.controller_stats
            started = time.perf_counter()
            stats.queue_time_ms.observe((started - called) * 1000)
            try:
                decision = decide(self.image)
                if apply and not decision.error:
                    # Counted on the image decided on, before the append replays
                    # the records into it; recorded once they have committed.
                    elections, unclean = count_elections(self.image, decision.records)
                    appended = time.perf_counter()
                    await self.metadata.append(decision.records,
                                               atomic=getattr(decision, "atomic", True))
                    committed = time.perf_counter()
                    if decision.records:
                        stats.commit_latency_ms.record((committed - appended) * 1000,
                                                       self.clock.monotonic_ms())
                    if elections:
                        stats.elected(elections, unclean, (committed - started) * 1000)
            finally:
                stats.processing_time_ms.observe((time.perf_counter() - started) * 1000)
            return decision

    # -- the metadata log's listener (broker/control/metadata_log.MetadataListener) --

    def apply(self, records: list[Any]) -> None:
        """Replay committed records into the image, on this node as on every other.

        Only what the records name is reconciled (the work is the batch's, not
        the image's size): the partitions of an election or an ISR change, the
        whole of a topic created, configured or removed; all of them if a record
        may change what every partition is given
        (:meth:`MetadataImage.topics_touched`) or the dynamic broker configs
        changed. When whether this node may lead changes (its registration is
        applied, or it is fenced), so do the partitions the image says it leads."""
        touched = self.image.replay_scoped(records)
        if self.apply_broker_configs():
            touched = None
        if self.metadata_ready:
            may_lead = self.registered
            if may_lead != self._reconciled_may_lead and touched is not None:
                _add_led(touched, self.image, self.node_id)
            self._reconciled_may_lead = may_lead
            self.partitions.reconcile(
                self.image, may_lead=may_lead, topics=touched,
                only=None if touched is None else {
                    n: i for n, i in touched.items() if i is not None})
            if not self.in_service.is_set() and self.registered:
                self.in_service.set()
            self._image_changed()

    def caught_up(self, offset: int) -> None:
        """The image has caught up with the metadata log (a quorum's: at least a
        high watermark committed in the current epoch, and at least what this
        node had before it stopped): open this broker's partitions.
        Directories the caught-up image does not know (their topic was deleted,
        or they were reassigned away while the node was down) are moved aside as
        ``-stray``, never deleted (as at a single node's start)."""
        self.metadata_ready = True
        self._reconciled_may_lead = self.registered
        self.partitions.reconcile(self.image, remove=False, at_offset=offset,
                                  may_lead=self._reconciled_may_lead)
        if self.registered:
            self.in_service.set()
        self._image_changed()

    def static_configs(self) -> dict[str, str]:
        """The ``server.properties`` values controller decisions fall back on."""
        return {"unclean.leader.election.enable":
                str(self.config.get_bool("unclean.leader.election.enable")).lower()}

    def restore(self, records: Iterable[Any]) -> None:
        """Start over from a metadata snapshot's records."""
        self.image = MetadataImage(static_configs=dict(self.image.static_configs))
        for record in records:
            self.image.replay(record)
        self.apply_broker_configs()
        if self.metadata_ready:
            self._reconciled_may_lead = self.registered
            self.partitions.reconcile(self.image, may_lead=self._reconciled_may_lead)
            self._image_changed()

    def _image_changed(self) -> None:
        for listener in self.on_image:
            listener(self.image)

    def image_records(self) -> list[Any]:
        return list(self.image.to_records())

    def listener_endpoints(self) -> list[tuple[str, str, int]]:
        return [(a.name, a.host, a.port) for a in self.advertised]

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

    def apply_broker_configs(self) -> bool:
        """Take in the image's dynamic broker configs (the cluster default and this
        node's) and pass what changed to the parts that read them: the topic
        defaults and the cleaner (:meth:`PartitionManager.reconfigure`; the next
        reconcile applies them to the logs), then :attr:`on_config_change`.
        Returns whether any changed."""
        changed = _take_dynamic_configs(self.config, self.image)
        if not changed:
            return False
        log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
        for apply in (lambda _: self.partitions.reconfigure(self.config.props),
                      *self.on_config_change):
            try:
                apply(changed)
            except Exception as exc:  # the records are committed: keep replaying
                log.warning("dynamic broker configs %s not applied: %s",
                            ", ".join(sorted(changed)), exc)
        return True


def _take_dynamic_configs(config: BrokerConfig, image: MetadataImage) -> set[str]:
    """Install the image's dynamic broker configs in ``config`` (only the names a
    running broker may change, as Kafka's brokers keep to them); the names whose
    effective value changed."""
    default = {k: v for k, v in image.broker_configs.get("", {}).items() if is_dynamic(k)}
    mine = {k: v for k, v in image.broker_configs.get(str(config.node_id), {}).items()
            if is_dynamic(k)}
    if default == config.dynamic_default and mine == config.dynamic_broker:
        return set()
    return config.set_dynamic(default, mine)


def _refuse_orphaned_partitions(config: BrokerConfig, partitions: PartitionManager) -> None:
    """An empty metadata journal beside partition directories means the journal was
    lost: starting would treat every topic as unknown. Refuse unless told to go on."""
    from odradek.broker.ports import METADATA_TOPIC

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


def _with(outcome: Outcome, records: list[Any]) -> Outcome:
    """``outcome`` with ``records`` appended when it succeeded."""
    if records and not outcome.error:
        outcome.records = [*outcome.records, *records]
    return outcome


def _add_led(scope: dict[str, set[int] | None], image: MetadataImage, node_id: int) -> None:
    """Add to ``scope`` the partitions ``image`` says ``node_id`` leads (one pass
    over the image, no reconcile of the others)."""
    for topic in image.topics.values():
        if scope.get(topic.name, ()) is None:
            continue  # the whole topic is in already
        led = {i for i, p in topic.partitions.items() if p.leader == node_id}
        if led:
            indexes = scope.setdefault(topic.name, set())
            assert indexes is not None
            indexes |= led

"""A broker process: state, listeners, and an orderly stop.

``odradek serve`` and ``odradek.testing.Broker`` both run a :class:`BrokerApp`.
What only a cluster node runs (the Raft quorum, replica fetchers, ISR
changes, broker sessions, the broker-to-broker channel) is imported when a
cluster node starts, so a single node's start-up does not pay for it.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import uuid
from typing import TYPE_CHECKING

from odradek.broker.aio import cancel_and_wait
from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.control.broker_state import BrokerSessions, BrokerState, SingleNodeSessions
from odradek.broker.control.dirlock import DirLock, lock_dirs
from odradek.broker.control.journal import LogJournal
from odradek.broker.control.meta_properties import DataDirError
from odradek.broker.control.metadata_log import JournalMetadataLog, MetadataLog
from odradek.broker.coordinators.group_runtime import GroupRuntime
from odradek.broker.coordinators.lag_metrics import LagMetrics, RemoteEnds
from odradek.broker.coordinators.txn_runtime import TxnRuntime
from odradek.broker.net.context import Services
from odradek.broker.net.server import KafkaServer
from odradek.broker.net.tls import ListenerTls, broker_client_security, controller_listener
from odradek.broker.peers import NoPeers
from odradek.broker.ports import METADATA_TOPIC
from odradek.broker.replica.manager import ReplicaManager
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.broker.replica.throttle import LEADER, ReplicationQuota
from odradek.common.clock import Clock, SystemClock
from odradek.common.ids import Ids, RandomIds
from odradek.common.metrics import Registry
from odradek.storage.fs import FileSystem, OsFileSystem
from odradek.storage.logdirs import LogDirsError

if TYPE_CHECKING:
    from odradek.broker.control.broker_channel import BrokerChannel
    from odradek.broker.control.quorum_metadata_log import QuorumMetadataLog
    from odradek.broker.net.pipeline import Stage
    from odradek.broker.observe.endpoint import MetricsEndpoint
    from odradek.broker.replica.fetchers import ReplicaFetchers
    from odradek.broker.replica.isr import IsrManager
    from odradek.raft.voters import Endpoint, VoterSet

log = logging.getLogger("odradek.broker")


class BrokerApp:
    def __init__(
        self, config: BrokerConfig, clock: Clock | None = None, ids: Ids | None = None,
        fs: FileSystem | None = None, stages: list[tuple[Stage, str]] | None = None,
    ) -> None:
        """``fs``: the file-system seam for partition logs (tests inject faults and
        stalls; default: real files). ``stages``: (stage, the stage it goes
        before) added to the request pipeline (broker/net/pipeline.py)."""
        self.config = config
        self.metrics = Registry()
        """Every metric of this broker (the request pipeline's among them)."""
        self.stages = list(stages or ())
        self.fs = fs
        self.clock = clock or SystemClock()
        self.ids: Ids = ids or RandomIds()
        self.partitions: PartitionManager | None = None
        self.state: BrokerState | None = None
        self.server: KafkaServer | None = None
        self.fetchers: ReplicaFetchers | None = None
        """Cluster mode: the replica fetchers copying the partitions this node follows."""
        self.isr: IsrManager | None = None
        """Cluster mode: ISR changes of the partitions this node leads."""
        self.groups: GroupRuntime | None = None
        """The group coordinator's runtime (built at start)."""
        self.txns: TxnRuntime | None = None
        """The transaction coordinator's runtime (built at start)."""
        self.quorum: QuorumMetadataLog | None = None
        """Cluster mode: the metadata log of the Raft quorum (what only the
        composition root starts, resigns and stops)."""
        self.peers: BrokerChannel | None = None
        """Cluster mode: requests to other brokers (the transaction markers)."""
        self.replicas: ReplicaManager | None = None
        self.endpoint: MetricsEndpoint | None = None
        """The metrics and health endpoint (``odradek.metrics.listener``), if set."""
        self.serving = False
        """The node serves: listeners open, metadata caught up, registered (``/readyz``)."""
        self._stopping = False
        self._lag_remote: RemoteEnds | None = None
        """End offsets of partitions led elsewhere, for the consumer lag gauges."""
        self._metadata_stopped = False
        self._registering: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._locks: list[DirLock] = []

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()  # close what was opened before the failure
            raise

    async def _start(self) -> None:
        # TLS listeners' keystores first: a bad one stops the start before the
        # data directories are touched (one line naming the key).
        tls = ListenerTls.for_config(self.config)
        # Before anything in the data directories is read or written: one broker
        # per directory (broker/control/dirlock.py).
        self._locks = lock_dirs(self.config.data_dirs())
        fs = OsFileSystem()
        cluster = self.config.is_cluster
        self.partitions = PartitionManager(
            [str(d) for d in self.config.log_dirs()], self.config.props, self.clock,
            self.fs or fs,
            node_id=self.config.node_id, ids=self.ids,
            foreign=frozenset({(METADATA_TOPIC, 0)}) if cluster else frozenset(),
            metadata_dir=str(self.config.metadata_dir),
            # One node leads all it hosts from the start: only a cluster node's
            # leaders move, and its coordinators and fetchers follow them.
            on_leadership=self._leadership_changed if cluster else None,
            on_isr_eligible=self._isr_eligible)
        try:
            self.partitions.startup()
        except LogDirsError as exc:
            raise DataDirError(str(exc)) from None
        # The one place a single node and a cluster node part ways: where the
        # metadata log lives (the local journal, or the Raft quorum).
        plane = _Quorum(self, fs) if cluster else _SingleNode(
            LogJournal(self.partitions.metadata_partition(), self.clock))
        self.state = BrokerState.open(self.config, self.partitions, plane, self.clock, self.ids)
        if cluster and "broker" in self.config.process_roles():
            from odradek.broker.replica.fetchers import ReplicaFetchers
            from odradek.broker.replica.isr import IsrManager

            self.fetchers = ReplicaFetchers(self.state)
            self.isr = IsrManager(self.state, self.state.channel.alter_partition)
            self.isr.start()
        self.partitions.start_housekeeping()
        if cluster:
            from odradek.broker.control.broker_channel import BrokerChannel

            self.peers = BrokerChannel(self.state)
        groups = self.groups = GroupRuntime(self.state, self.partitions, self.config, self.clock)
        self.txns = TxnRuntime(self.state, self.partitions, self.config, self.clock,
                               lambda: groups, self.peers)
        self.state.on_image += [self.groups.on_metadata, self.txns.on_metadata]
        if not cluster:
            self.groups.start()
            self.txns.start()
        replicas = self.replicas = ReplicaManager(
            self.partitions, self.state, self.clock.now_ms,
            ReplicationQuota(self.state, LEADER) if cluster else None)
        self.server = KafkaServer(self.state, Services(replicas, self.groups, self.txns),
                                  self.metrics, self.stages, self._forward_stage(), tls)
        # A single node registers once bound, before serving; a cluster node
        # registers with the controller once serving (peers must reach it).
        await self.server.start(None if cluster else self.state.register)
        if self.quorum is not None:
            from odradek.broker.control.sessions import rebalance_forever

            self.quorum.start()
            loop = asyncio.get_running_loop()
            self._background.append(loop.create_task(self.state.sessions.run()))
            if self.config.get_bool("auto.leader.rebalance.enable"):
                self._background.append(loop.create_task(rebalance_forever(self.state)))
            self._registering = loop.create_task(self._join())
        else:
            self.serving = True
        await self._start_endpoint()
        log.info("odradek %s %d listening on %s", self._role_name(), self.state.node_id,
                 self.bootstrap_servers)

    async def _start_endpoint(self) -> None:
        """The metrics and health endpoint, when ``odradek.metrics.listener`` is set
        (after the Kafka listeners: ``/readyz`` says 503 until :attr:`serving`)."""
        where = self.config.metrics_listener()
        if where is None:
            return
        from odradek.broker.observe import (
            cleaner_metrics,
            connection_metrics,
            controller_metrics,
            kafka_metrics,
            quota_metrics,
            raft_metrics,
            replication_metrics,
        )
        from odradek.broker.observe.endpoint import MetricsEndpoint

        kafka_metrics.register(self.metrics, self)
        for family in (controller_metrics, raft_metrics, cleaner_metrics, quota_metrics,
                       connection_metrics):
            family.register(self.metrics, self)
        replication_metrics.register(self.metrics, self)
        # Consumer lag, computed when the registry is rendered (a scrape).
        meta, partitions = self.state, self.partitions
        assert meta is not None and partitions is not None  # built by start() before
        self._lag_remote = RemoteEnds(self.peers or NoPeers(), lambda: meta.image, self.clock)
        LagMetrics(lambda: self.groups, partitions, lambda: meta.image,
                   self._lag_remote).register(self.metrics)
        self.endpoint = MetricsEndpoint(self.metrics, self.readiness, *where)
        try:
            await self.endpoint.start()
        except OSError as exc:
            self.endpoint = None
            raise ConfigError(f"odradek.metrics.listener: cannot listen on "
                              f"{where[0]}:{where[1]}: {exc.strerror}") from None
        log.info("metrics and health endpoint on http://%s/metrics", self.endpoint.address)

    def readiness(self) -> str | None:
        """None once this node serves, else why not (``/readyz``'s one line)."""
        if self._stopping:
            return "stopping"
        if self.server is None or self.state is None:
            return "starting: the Kafka listeners are not open yet"
        if not self.serving:
            if self.quorum is not None and not self.quorum.driver.ready:
                return "starting: the metadata log has not caught up yet"
            return "starting: not registered with the controller yet"
        return None

    def _forward_stage(self) -> Stage | None:
        """A cluster node's ``forward`` stage of the request pipeline (none on one
        node, its own controller)."""
        state = self.state
        assert state is not None
        if self.quorum is None:
            return None
        from odradek.broker.net.forward import ForwardToController

        # As long as the quorum takes to replace a lost leader (its followers'
        # fetch timeout, then an election and its backoff): a request sent just
        # after the controller stopped waits for the next one, as Kafka's
        # forwarding waits, instead of being answered NOT_CONTROLLER.
        get = self.config.get_int
        wait_ms = (get("controller.quorum.fetch.timeout.ms")
                   + get("controller.quorum.election.timeout.ms")
                   + get("controller.quorum.election.backoff.max.ms"))
        return ForwardToController(state.metadata, state.channel,
                                   frozenset(self.config.controller_listener_names()),
                                   wait_s=wait_ms / 1000)

    def _leadership_changed(self, moved: list[Partition]) -> None:
        """Partitions whose leader changed (cluster mode): followers fetch from the
        new leader; coordinators load what they now lead and drop the rest."""
        state = self.state
        if state is None:
            return
        if self.fetchers is not None:
            self.fetchers.update(moved)
        if self.groups is not None:
            self.groups.leadership_changed(moved)
        if self.txns is not None:
            self.txns.leadership_changed(moved)

    def _isr_eligible(self) -> None:
        """A follower's fetch may let it join an ISR (cluster mode): the ISR
        manager looks at once."""
        if self.isr is not None:
            self.isr.poke()

    def _role_name(self) -> str:
        roles = self.config.process_roles()
        return "controller" if "broker" not in roles else "broker"

    @property
    def bootstrap_servers(self) -> str:
        """The client listeners (a controller-only node: its CONTROLLER listeners)."""
        assert self.state is not None
        if self.state.advertised:
            return ",".join(f"{a.host}:{a.port}" for a in self.state.advertised)
        return ",".join(f"{x.host}:{x.port}" for x in self.config.controller_listeners())

    def bound_address(self) -> str:
        """host:port of the first listener as bound (not as advertised)."""
        assert self.server is not None
        host = self.config.listeners()[0].host or "127.0.0.1"
        return f"{host}:{self.server.bound_ports()[0]}"

    async def _join(self) -> None:
        """Cluster mode: register with the controller; once the metadata log has
        been replayed up to this registration, the image says which coordinator
        partitions this broker leads, and the coordinators load them."""
        from odradek.broker.control.sessions import heartbeat_forever

        state = self.state
        assert state is not None and self.groups is not None and self.txns is not None
        if "broker" not in self.config.process_roles():
            # A controller-only node serves no partitions and no groups.
            await state.metadata.wait_ready()
            self.serving = True
            return
        await state.metadata.wait_ready()
        await state.register()
        while (b := state.image.brokers.get(state.node_id)) is None or (
                b.incarnation_id != state.incarnation):  # our registration, applied here
            await asyncio.sleep(0.02)
        self._background.append(asyncio.get_running_loop().create_task(
            heartbeat_forever(state)))
        self.groups.start()
        self.txns.start()
        self.serving = True
        log.info("node %d registered with controller %d", state.node_id, state.controller_id)

    async def stop(self) -> None:
        self._stopping = True
        self.serving = False
        await cancel_and_wait(self._registering, *self._background)
        if self._lag_remote is not None:
            await self._lag_remote.close()
            self._lag_remote = None
        self._registering = None
        self._background.clear()
        if self.quorum is not None:
            if "broker" in self.config.process_roles():
                await self._controlled_shutdown()
            await self.quorum.resign()
        if self.fetchers is not None:
            await self.fetchers.close()
            self.fetchers = None
        if self.isr is not None:
            await self.isr.close()
            self.isr = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.txns is not None:
            await self.txns.close()
            self.txns = None
        if self.peers is not None:
            await self.peers.close()
            self.peers = None
        if self.groups is not None:
            await self.groups.close()
            self.groups = None
        if self.state is not None and not self._metadata_stopped:
            self._metadata_stopped = True
            await self.state.metadata.stop()  # the journal closes; the quorum stops
            await self.state.channel.close()
            await self.state.heartbeats.close()
            self.quorum = None
        if self.partitions is not None:
            await self.partitions.close()
            self.partitions = None
        if self.endpoint is not None:  # last: /healthz answers while the node stops
            await self.endpoint.stop()
            self.endpoint = None
        for lock in self._locks:
            lock.release()
        self._locks = []

    async def _controlled_shutdown(self, timeout_s: float = 5.0) -> None:
        """The controller fences this broker before it goes (a last heartbeat
        with ``WantShutDown``). Waits up to ``timeout_s`` for the answer, but no
        longer than the quorum can still commit: when this node is the active
        controller and its voters stopped fetching (the whole cluster is going
        down), the fence could never commit."""
        from odradek.broker.control.sessions import send_heartbeat

        assert self.state is not None and self.quorum is not None
        quorum = self.quorum
        window_ms = quorum.fetch_max_wait_ms + 500
        beat = asyncio.ensure_future(send_heartbeat(self.state, want_shut_down=True))
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not beat.done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.wait({beat}, timeout=0.05)
            if not quorum.majority_in_touch(window_ms):
                log.info("controlled shutdown: the quorum lost its majority; going without")
                break
        await cancel_and_wait(beat)

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()


class _SingleNode:
    """A single node's control plane: the metadata log is the local journal and
    no other broker registers."""

    def __init__(self, journal: LogJournal) -> None:
        self.journal = journal

    def metadata_log(self, state: BrokerState) -> MetadataLog:
        return JournalMetadataLog(self.journal, state.node_id, state.clock, state)

    def sessions(self, state: BrokerState) -> BrokerSessions:
        return SingleNodeSessions()


class _Quorum:
    """A cluster node's control plane: the metadata log is the Raft quorum's
    (in ``metadata.log.dir``), and the active controller keeps broker sessions."""

    def __init__(self, app: BrokerApp, fs: OsFileSystem) -> None:
        self.app = app
        self.fs = fs

    def metadata_log(self, state: BrokerState) -> MetadataLog:
        from odradek.broker.control.quorum_metadata_log import QuorumMetadataLog
        from odradek.raft.file_log import FileRaftLog, RaftLogError
        from odradek.raft.node import RaftConfig
        from odradek.raft.quorum_state import FileQuorumStateStore, QuorumStateError

        config = state.config
        directory = posixpath.join(str(config.metadata_dir), f"{METADATA_TOPIC}-0")
        voters = {v.node_id: (v.host, v.port) for v in config.quorum_voters()}
        raft_config = RaftConfig(
            election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
            request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
            election_backoff_max_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
        )
        store = FileQuorumStateStore(self.fs, directory)
        try:
            raft_log = FileRaftLog(self.fs, directory)
            store.read()  # a damaged file stops the start here, with its one line
        except (RaftLogError, QuorumStateError) as exc:
            raise DataDirError(str(exc)) from None
        bootstrap_voters, directory_id = _dynamic_quorum(config)
        quorum = self.app.quorum = QuorumMetadataLog(
            state, config.node_id, voters, state.cluster_id, raft_log, store, raft_config,
            state.clock, config.get_int("metadata.log.max.record.bytes.between.snapshots"),
            config.get_int("metadata.log.max.snapshot.interval.ms"),
            broker_client_security(config, controller_listener(config)),
            bootstrap_voters=bootstrap_voters, directory_id=directory_id,
            bootstrap_servers=config.quorum_bootstrap_servers(),
            endpoints=_own_controller_endpoints(config))
        return quorum

    def sessions(self, state: BrokerState) -> BrokerSessions:
        from odradek.broker.control.sessions import Sessions

        return Sessions(state)


def _own_controller_endpoints(config: BrokerConfig) -> tuple[Endpoint, ...]:
    """This controller's endpoints as the voter set should hold them: its controller
    listeners in ``controller.listener.names`` order, as advertised (KIP-853's
    UpdateRaftVoter keeps them current). Empty on a broker, or when the first has
    no host or an ephemeral port (what others reach it on is not known then)."""
    from odradek.raft.voters import Endpoint

    if "controller" not in config.process_roles():
        return ()
    found = {lis.name: lis for lis in config.listeners()}
    found.update({lis.name: lis for lis in config.advertised_listeners()})
    out = []
    for name in config.controller_listener_names():
        lis = found.get(name)
        if lis is not None and lis.host and lis.port:
            out.append(Endpoint(name, lis.host, lis.port))
        elif not out:
            return ()
    return tuple(out)


def _dynamic_quorum(config: BrokerConfig) -> tuple[VoterSet | None, uuid.UUID]:
    """A controller's bootstrap voter set (KIP-853, written by ``storage format``;
    None: a static quorum, or a broker) and its metadata directory's id."""
    from odradek.broker.control.meta_properties import META_PROPERTIES, directory_ids
    from odradek.broker.control.quorum_bootstrap import read_bootstrap_voters
    from odradek.raft.voters import NO_DIRECTORY

    ids = directory_ids([config.metadata_dir])
    directory_id = ids[0] if ids else NO_DIRECTORY
    if "controller" not in config.process_roles() or config.quorum_voters():
        return None, directory_id
    try:
        voters = read_bootstrap_voters(config.metadata_dir)
    except ValueError as exc:
        raise DataDirError(str(exc)) from None
    if voters is None and config.quorum_bootstrap_servers():
        raise DataDirError(
            f"{config.metadata_dir} has no bootstrap voters while "
            f"controller.quorum.bootstrap.servers is set: format it with --standalone, "
            f"--initial-controllers or --no-initial-controllers ({META_PROPERTIES} alone "
            f"does not say)")
    return voters, directory_id

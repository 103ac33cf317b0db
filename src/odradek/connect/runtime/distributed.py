"""A distributed worker: one member of a Connect cluster (``group.id``).

:meth:`DistributedWorker.start` checks the broker, creates or checks the three
internal topics (compacted; the config topic with exactly one partition),
reads them to their end, binds the REST listener and starts the rebalance
loop on the event loop. The loop: read the config topic to its end, join the
group (:class:`ConnectMember`) with this worker's URL, config offset and what
it runs; the leader runs the incremental cooperative assignor; the worker
stops what is revoked and starts what is assigned; then, until the group
rebalances, heartbeats go out every ``heartbeat.interval.ms`` (a task of their
own) while the loop acts on config changes and writes statuses. A change of
the configured work (a connector added or removed, a task count changed), a
heartbeat answered REBALANCE_IN_PROGRESS or the assignment's ``delay``
running out makes it join again; so does an assignment that revoked work
(KIP-415: the revoked work is handed out in the next round). :meth:`stop` stops every task (flushing
source offsets), leaves the group and closes the topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError
from odradek.client.properties import security_from_properties
from odradek.connect.distributed.assignor import IncrementalCooperativeAssignor, eager_assign
from odradek.connect.distributed.protocol import (
    CONFIG_MISMATCH,
    EAGER,
    NO_ERROR,
    Assignment,
    WorkerState,
)
from odradek.connect.runtime.dconfig import DistributedConfig
from odradek.connect.runtime.dherder import DistributedHerder
from odradek.connect.runtime.dstate import QUIET, ClusterState
from odradek.connect.runtime.forward import DistributedRestApi
from odradek.connect.runtime.kafkalog import KafkaLogError
from odradek.connect.runtime.member import ConnectMember, Joined, Rejoin
from odradek.connect.runtime.offset_topic import TopicOffsets
from odradek.connect.runtime.worker import WorkerError, cluster_id

log = logging.getLogger(__name__)
TICK_S = 0.25
RETRY_S = 1.0


class DistributedWorker:
    def __init__(self, props: Mapping[str, str]) -> None:
        self.config = DistributedConfig.parse(props)
        w = self.config.worker
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cluster = ClusterState(self.config, self._changed)
        self.offsets = TopicOffsets(
            self.config.offset_topic, {**w.client_config("consumer"), "log_level": QUIET},
            {**w.client_config("producer"), "log_level": QUIET},
            partitions=self.config.offset_partitions,
            replication_factor=self.config.offset_rf,
            admin_config={**w.client_config("consumer"), "log_level": QUIET})
        self.herder = DistributedHerder(self.config, self.cluster, self.offsets)
        self.assignor = IncrementalCooperativeAssignor(self.config.max_delay_ms)
        self.runner: web.AppRunner | None = None
        self.client: KafkaClient | None = None
        self.member: ConnectMember | None = None
        self.url = ""
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.ended = asyncio.Event()
        """Set when the group loop ends (after :meth:`stop`, or ``error`` says why)."""
        self.error = ""

    def _changed(self) -> None:
        """Called by the config topic's reader thread: wake the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    async def start(self) -> str:
        """Start; the URL it serves at. Raises :class:`WorkerError` (one line)."""
        self._loop = asyncio.get_running_loop()
        cid = await asyncio.to_thread(cluster_id, self.config.worker)
        try:
            await asyncio.to_thread(self.cluster.ensure_topics)
            await asyncio.to_thread(self.offsets.start)
            await asyncio.to_thread(self.cluster.start)
        except KafkaLogError as e:
            await asyncio.to_thread(self._close_logs)
            raise WorkerError(str(e)) from None
        await self._listen(cid)
        props = self.config.worker.props
        try:
            security = security_from_properties(
                {k: v for k, v in props.items() if k.startswith(("ssl.", "sasl.", "security."))})
            self.client = await KafkaClient.connect(self.config.worker.bootstrap_servers,
                                                    f"connect-{self.config.group_id}",
                                                    security=security)
        except (ValueError, ClientError, OSError) as e:
            await self.stop()
            raise WorkerError(f"cannot join group {self.config.group_id}: {e}") from None
        self.member = ConnectMember(
            self.client, self.config.group_id, self.config.connect_protocol,
            session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.rebalance_timeout_ms)
        self._task = asyncio.create_task(self._run())
        self._task.add_done_callback(self._ended)
        return self.url

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            e = task.exception()
            log.error("the worker's group loop failed", exc_info=e)
            self.error = f"the worker stopped: {type(e).__name__}: {e}"
        self.ended.set()

    async def _listen(self, cid: str) -> None:
        api = DistributedRestApi(self.herder, cid)
        self.runner = web.AppRunner(api.app, access_log=None)
        await self.runner.setup()
        host, port = self.config.worker.host, self.config.worker.port
        site = web.TCPSite(self.runner, host, port)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise WorkerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        server: Any = site._server
        sockets = server.sockets if server is not None else []
        bound = sockets[0].getsockname()[1] if sockets else port
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.url = self.config.advertised_url(shown, bound)
        self.herder.worker_id = self.url.removeprefix("http://")

    def _close_logs(self) -> None:
        self.cluster.stop()
        self.offsets.stop()

    # -- the rebalance loop -------------------------------------------------------------

    def _assign(self, generation: int, leader: str, members: Mapping[str, WorkerState]
                ) -> Mapping[str, Assignment]:
        snap = self.cluster.snapshot()
        now = int(time.monotonic() * 1000)
        configured = self.herder.configured()
        if self.member is not None and self.member.version == EAGER:
            # every member runs exactly its answer (what is not in it stops)
            return eager_assign(leader, self.url, snap.offset, members, configured)
        return self.assignor.assign(leader, self.url, snap.offset, members, configured, now,
                                    generation=generation)

    def _state(self) -> WorkerState:
        connectors, tasks = self.herder.work.allocation()
        offset = self.cluster.snapshot().offset
        mine = Assignment(NO_ERROR, "", self.url, offset, connectors, tasks)
        return WorkerState(self.url, offset, mine)

    async def _run(self) -> None:
        assert self.member is not None
        member = self.member
        while not self._stopping:
            self.herder.rebalancing()
            try:
                await asyncio.to_thread(self.cluster.config_log.read_to_end,
                                        self.config.sync_timeout_ms / 1000)
                await asyncio.to_thread(self.herder.tick)
                configured = self.herder.configured()
                joined = await member.join(self._state(), self._assign)
            except (Rejoin, KafkaLogError) as e:
                log.info("rejoining: %s", e)
                continue
            try:
                await self._round(member, joined, configured)
            except (KafkaLogError, OSError, RuntimeError) as e:
                # e.g. the offsets topic not read in time: join again, keeping
                # what runs; anything else is a bug and ends the worker loudly
                log.warning("generation %d: %s; joining again", joined.generation, e)
                await asyncio.sleep(RETRY_S)

    async def _round(self, member: ConnectMember, joined: Joined,
                     configured: dict[str, int]) -> None:
        """Apply one assignment, then stay in the group until it must rebalance."""
        a = joined.assignment
        if a.error == CONFIG_MISMATCH:
            log.info("config offset %d behind the group's; reading on", a.config_offset)
            return
        log.info("generation %d (%s): assigned %s %s, revoked %s %s, delay %d ms",
                 joined.generation, "leader" if joined.leader else "member", a.connectors,
                 [f"{t.connector}-{t.task}" for t in a.tasks], a.revoked_connectors,
                 [f"{t.connector}-{t.task}" for t in a.revoked_tasks], a.delay_ms)
        self.herder.joined(joined.generation, joined.leader, a.leader_url)
        await asyncio.to_thread(self.herder.work.apply, a, member.version == EAGER)
        if a.revoked_connectors or a.revoked_tasks:
            return  # join again at once without it: the leader hands it out then
        await self._steady(member, configured, a.delay_ms)

    async def _steady(self, member: ConnectMember, configured: dict[str, int],
                      delay_ms: int) -> None:
        """Heartbeat and act on config changes until the group must rebalance."""
        rejoin = asyncio.Event()

        async def heartbeats() -> None:
            while True:
                await asyncio.sleep(self.config.heartbeat_interval_ms / 1000)
                if not await member.heartbeat():
                    rejoin.set()
                    self._wake.set()
                    return

        beating = asyncio.create_task(heartbeats())
        deadline = time.monotonic() + delay_ms / 1000 if delay_ms else None
        try:
            while not self._stopping and not rejoin.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), TICK_S)
                self._wake.clear()
                await asyncio.to_thread(self.herder.tick)
                if self.herder.configured() != configured:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    return
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await asyncio.to_thread(self.herder.shutdown)
        if self.member is not None:
            await self.member.leave()
        if self.client is not None:
            await self.client.close()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        await asyncio.to_thread(self._close_logs)

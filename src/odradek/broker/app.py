"""A broker process: state, listeners, and an orderly stop.

``odradek serve`` and ``odradek.testing.Broker`` both run a :class:`BrokerApp`.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.config import BrokerConfig
from odradek.broker.groups import GroupRuntime
from odradek.broker.journal import LogJournal
from odradek.broker.partitions import PartitionManager
from odradek.broker.server import KafkaServer
from odradek.broker.state import BrokerState, MetadataJournal
from odradek.broker.transactions import TxnRuntime
from odradek.common.clock import Clock, SystemClock
from odradek.common.ids import Ids, RandomIds
from odradek.storage.fs import OsFileSystem

log = logging.getLogger("odradek.broker")


class BrokerApp:
    def __init__(
        self, config: BrokerConfig, clock: Clock | None = None, ids: Ids | None = None
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.ids: Ids = ids or RandomIds()
        self.journal: MetadataJournal | None = None
        self.partitions: PartitionManager | None = None
        self.state: BrokerState | None = None
        self.server: KafkaServer | None = None

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()  # close what was opened before the failure
            raise

    async def _start(self) -> None:
        log_dir = str(self.config.log_dir)
        fs = OsFileSystem()
        self.partitions = PartitionManager(log_dir, self.config.props, self.clock, fs,
                                           node_id=self.config.node_id, ids=self.ids)
        self.partitions.startup()
        self.journal = LogJournal(self.partitions.metadata_partition(), self.clock)
        self.state = BrokerState.open(self.config, self.journal, self.partitions, self.clock,
                                      self.ids)
        self.partitions.start_housekeeping()
        self.state.groups = GroupRuntime(self.state, self.partitions, self.config, self.clock)
        self.state.groups.start()
        state = self.state
        self.state.txns = TxnRuntime(state, self.partitions, self.config, self.clock,
                                     lambda: state.groups)
        self.state.txns.start()
        self.server = KafkaServer(self.state)
        await self.server.start()
        log.info("odradek broker %d listening on %s", self.state.node_id,
                 ", ".join(f"{a.host}:{a.port}" for a in self.state.advertised))

    @property
    def bootstrap_servers(self) -> str:
        assert self.state is not None
        return ",".join(f"{a.host}:{a.port}" for a in self.state.advertised)

    def bound_address(self) -> str:
        """host:port of the first listener as bound (not as advertised)."""
        assert self.server is not None
        host = self.config.listeners()[0].host or "127.0.0.1"
        return f"{host}:{self.server.bound_ports()[0]}"

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.state is not None and self.state.txns is not None:
            await self.state.txns.close()
            self.state.txns = None
        if self.state is not None and self.state.groups is not None:
            await self.state.groups.close()
            self.state.groups = None
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        if self.partitions is not None:
            await self.partitions.close()
            self.partitions = None

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

"""A broker process: state, listeners, and an orderly stop.

``odradek serve`` and ``odradek.testing.Broker`` both run a :class:`BrokerApp`.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.config import BrokerConfig
from odradek.broker.server import KafkaServer
from odradek.broker.state import BrokerState, MemoryJournal, MetadataJournal

log = logging.getLogger("odradek.broker")


class BrokerApp:
    def __init__(self, config: BrokerConfig, journal: MetadataJournal | None = None) -> None:
        self.config = config
        self.journal = journal or MemoryJournal()
        self.state: BrokerState | None = None
        self.server: KafkaServer | None = None

    async def start(self) -> None:
        self.state = BrokerState.open(self.config, self.journal)
        self.server = KafkaServer(self.state)
        await self.server.start()
        log.info("odradek broker %d listening on %s", self.state.node_id,
                 ", ".join(f"{a.host}:{a.port}" for a in self.state.advertised))

    @property
    def bootstrap_servers(self) -> str:
        assert self.state is not None
        return ",".join(f"{a.host}:{a.port}" for a in self.state.advertised)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        self.journal.close()

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

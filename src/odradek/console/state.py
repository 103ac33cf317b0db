"""What the console holds between requests: one reconnecting Kafka client,
each group's lag history, and the broker metrics history.

Invariants: at most one :class:`KafkaClient` is open at a time (``_client``);
a connection-level failure closes it and the next call opens a new one (an
admin request is never retried on its own: the page says what failed).
Histories are bounded deques (:data:`HISTORY`), so memory does not grow
with uptime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, UnsupportedApi
from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.console import lag, metrics

T = TypeVar("T")
HISTORY = 360
"""Samples kept per series (an hour at the default 10 s interval)."""
CONNECT_TIMEOUT_S = 4.0
"""As the other commands: a silent port is "not a broker" within 5 s."""

log = logging.getLogger("odradek.console")


@dataclass
class Console:
    bootstrap: str
    security: ClientSecurity = PLAINTEXT
    metrics_urls: list[str] = field(default_factory=list)
    sample_interval_s: float = 10.0
    lag_history: dict[str, deque[lag.LagSample]] = field(default_factory=dict)
    """group -> (time, total lag, per-partition lag) samples, oldest first."""
    metric_history: deque[metrics.MetricSample] = field(
        default_factory=lambda: deque(maxlen=HISTORY))
    tails: int = 0
    """Live tails streaming now (each holds a Kafka connection of its own)."""
    _client: KafkaClient | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def client(self) -> KafkaClient:
        async with self._lock:
            if self._client is None:
                self._client = await KafkaClient.connect(
                    self.bootstrap, client_id="odradek-console", timeout_s=CONNECT_TIMEOUT_S,
                    security=self.security)
            return self._client

    async def new_client(self) -> KafkaClient:
        """A client of its own (the live tail's long polls must not queue the
        pages' requests behind them on the shared connection)."""
        return await KafkaClient.connect(self.bootstrap, client_id="odradek-console-tail",
                                         timeout_s=CONNECT_TIMEOUT_S, security=self.security)

    async def run(self, work: Callable[[KafkaClient], Awaitable[T]]) -> T:
        """``work`` on the shared client; a broken connection is dropped (the
        next call reconnects) and the error raised."""
        client = await self.client()
        try:
            return await work(client)
        except UnsupportedApi:
            raise  # the connection is fine
        except (ClientError, OSError, TimeoutError, EOFError):
            await self.drop(client)
            raise

    async def drop(self, client: KafkaClient) -> None:
        async with self._lock:
            if self._client is client:
                self._client = None
        with contextlib.suppress(Exception):
            await client.close()

    def start_sampling(self) -> None:
        self._tasks.append(asyncio.create_task(self._sample_forever(self._sample_lag)))
        if self.metrics_urls:
            self._tasks.append(asyncio.create_task(self._sample_forever(self._sample_metrics)))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._client is not None:
            await self.drop(self._client)

    async def _sample_forever(self, sample: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await sample()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the cluster may be down: keep trying
                log.debug("sampling failed: %s", exc)
            await asyncio.sleep(self.sample_interval_s)

    async def _sample_lag(self) -> None:
        samples = await self.run(lag.sample_all)
        now = time.time()
        for group, per_partition in samples.items():
            history = self.lag_history.setdefault(group, deque(maxlen=HISTORY))
            history.append(lag.LagSample(now, sum(per_partition.values()), per_partition))

    async def _sample_metrics(self) -> None:
        sample = await metrics.scrape(self.metrics_urls)
        self.metric_history.append(sample)

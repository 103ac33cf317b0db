"""A standalone worker: the herder, the offsets file and the REST server.

:meth:`StandaloneWorker.start` checks the broker (one metadata request, so a
wrong ``bootstrap.servers`` fails at once), binds the listener, then creates
the connectors given at start-up; :meth:`stop` stops every task (flushing its
offsets) and the server. :meth:`start_in_thread` runs it on an event loop in a
thread of its own (tests, embedding).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from odradek.connect.runtime import eos
from odradek.connect.runtime.config import WorkerConfig
from odradek.connect.runtime.herder import Herder
from odradek.connect.runtime.kafkalog import KafkaLogError
from odradek.connect.runtime.offset_topic import TopicOffsets
from odradek.connect.runtime.offsets import OffsetFile, OffsetStore
from odradek.connect.runtime.rest import RestApi
from odradek.connect.runtime.validation import RestError

BROKER_TIMEOUT_S = 5.0


class WorkerError(Exception):
    """The worker cannot start (one line)."""


def cluster_id(config: WorkerConfig) -> str:
    # quiet: the one-line error below says it (librdkafka would log each retry)
    admin = AdminClient({**config.client_config("consumer"), "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=BROKER_TIMEOUT_S)
    except KafkaException as e:
        raise WorkerError(f"no broker at {config.bootstrap_servers}: "
                          f"{e.args[0].str() if e.args else e}") from None
    return str(metadata.cluster_id or "")


class StandaloneWorker:
    def __init__(self, props: Mapping[str, str],
                 connectors: Sequence[Mapping[str, str]] = ()) -> None:
        self.config = WorkerConfig.parse(props)
        self.offsets: OffsetStore
        self.topic_offsets: TopicOffsets | None = None
        if eos.enabled(self.config):  # an Odradek extension: see docs/connect.md
            self.offsets = self.topic_offsets = eos.offsets_topic(self.config)
        else:
            try:
                self.offsets = OffsetFile(self.config.offsets_file)
            except (OSError, ValueError) as e:
                raise WorkerError(str(e)) from None
        self.herder = Herder(self.config, self.offsets)
        self.connectors = list(connectors)
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    async def start(self) -> str:
        """The URL it serves at."""
        cid = await asyncio.to_thread(cluster_id, self.config)
        api = RestApi(self.herder, cid)
        self.runner = web.AppRunner(api.app, access_log=None)
        await self.runner.setup()
        host = self.config.host
        site = web.TCPSite(self.runner, host, self.config.port)
        try:
            await site.start()
        except OSError as e:
            await self.runner.cleanup()
            raise WorkerError(f"cannot listen on {host}:{self.config.port}: "
                              f"{e.strerror or e}") from None
        server: Any = site._server
        sockets = server.sockets if server is not None else []
        port = sockets[0].getsockname()[1] if sockets else self.config.port
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.url = f"http://{shown}:{port}"
        self.herder.worker_id = f"{shown}:{port}"
        if self.topic_offsets is not None:
            try:
                await asyncio.to_thread(self.topic_offsets.start)
            except KafkaLogError as e:
                await self.stop()
                raise WorkerError(str(e)) from None
        for props in self.connectors:
            name = props.get("name", "")
            try:
                await asyncio.to_thread(self.herder.create, name, props)
            except RestError as e:
                await self.stop()
                raise WorkerError(f"connector {name or '(no name)'}: "
                                  f"{e.message.replace(chr(10), '; ')}") from None
        return self.url

    async def stop(self) -> None:
        await asyncio.to_thread(self.herder.shutdown)
        if self.topic_offsets is not None:
            await asyncio.to_thread(self.topic_offsets.stop)
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    # -- on a thread of its own ----------------------------------------------

    def start_in_thread(self) -> str:
        ready = threading.Event()
        error: list[BaseException] = []

        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                await self.start()
            except BaseException as e:
                error.append(e)
                ready.set()
                return
            ready.set()
            await self._stopped.wait()
            await self.stop()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="connect-worker", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            self._thread.join()
            raise error[0]
        return self.url

    def stop_thread(self) -> None:
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join()

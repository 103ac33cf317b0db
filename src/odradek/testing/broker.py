"""A real broker inside a test process, on an ephemeral port.

It runs its own event loop in a daemon thread so synchronous clients
(confluent-kafka, kafka-python) and asyncio clients (aiokafka, on the test's
own loop) can both talk to it.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from types import TracebackType

from odradek.broker.app import BrokerApp
from odradek.broker.config import BrokerConfig


class Broker:
    """``with Broker() as b: ... b.bootstrap_servers ...``"""

    def __init__(
        self, *, use_uvloop: bool = False, data_dir: str | None = None, **overrides: str
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="odradek-")
        data = data_dir or (self._tmp.name if self._tmp else "")
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        self.config = BrokerConfig.from_sources(None, props)
        self.app = BrokerApp(self.config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._use_uvloop = use_uvloop

    @property
    def bootstrap_servers(self) -> str:
        return self.app.bootstrap_servers

    def start(self) -> Broker:
        self._thread = threading.Thread(target=self._run, name="odradek-broker", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop: asyncio.AbstractEventLoop
        if self._use_uvloop:
            import uvloop

            loop = uvloop.new_event_loop()
        else:
            loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        await self.app.start()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.app.stop()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

"""The console's aiohttp application and its server.

HTTP limits (the console faces browsers, possibly hostile ones): a request
line or header field over :data:`MAX_LINE_BYTES` bytes, or more than
:data:`MAX_HEADERS` headers, is refused with a 4xx before any handler runs;
a body over :data:`MAX_BODY_BYTES` bytes is refused with 413; a connection
that sends nothing for :data:`IDLE_TIMEOUT_S` (idle between requests, or
stalled in the middle of one: aiohttp's keep-alive timer covers both) is
closed. Each connection is its own task, so a slow client holds only its
own connection until then, and the console is a process apart from the
brokers, so it cannot stall their Kafka listeners.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from odradek.console import access, groups, messages, overview, topics
from odradek.console.state import Console
from odradek.console.web import CONSOLE, ENV, STATIC, environment, errors

MAX_LINE_BYTES = 8190
MAX_HEADERS = 100
MAX_BODY_BYTES = 256 << 10
IDLE_TIMEOUT_S = 15.0


def build_app(state: Console) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[errors])
    app[CONSOLE] = state
    app[ENV] = environment()
    for module in (overview, topics, messages, groups, access):
        app.add_routes(module.routes)
    app.router.add_static("/static", STATIC)
    return app


@dataclass
class ConsoleServer:
    """The console listening on ``host:port`` (0: any free port); :attr:`url`
    once started. Starting connects to the cluster first, so a wrong address
    fails at once rather than on the first page."""

    state: Console
    host: str = "127.0.0.1"
    port: int = 8080
    idle_timeout_s: float = IDLE_TIMEOUT_S
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        client = await self.state.client()
        await client.metadata([])  # fails here, with ClientError, if no broker answers
        self._runner = web.AppRunner(
            build_app(self.state), max_line_size=MAX_LINE_BYTES, max_field_size=MAX_LINE_BYTES,
            max_headers=MAX_HEADERS, keepalive_timeout=self.idle_timeout_s, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await self.stop()
            raise
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}/"
        self.state.start_sampling()
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.state.close()


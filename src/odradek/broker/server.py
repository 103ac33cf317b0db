"""The asyncio server: accept connections, frame requests, dispatch, respond.

Each connection is a ``BufferedProtocol`` over a sans-IO
:class:`~odradek.wire.frames.ServerConnection` and one task that serves its
requests strictly in order, one at a time, as Kafka does (a long-polling Fetch
holds back the next request on that connection, not on others).

Bad input: a frame whose size prefix is negative or above
``socket.request.max.bytes``, an unknown API key, an unadvertised version of
any API but ApiVersions, or a body that does not decode closes the
connection, as Kafka does. An unsupported ApiVersions version gets a v0 body
with UNSUPPORTED_VERSION and the full API list (KIP-511).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import odradek.broker.handlers  # noqa: F401  (registers every handler)
from odradek.broker.context import RequestContext
from odradek.broker.registry import HANDLERS, CloseConnection
from odradek.broker.state import BrokerState
from odradek.broker.transfer import write_parts
from odradek.wire.frames import BadRequest, FrameError, Request, ServerConnection, encode_response

log = logging.getLogger("odradek.broker")

# Requests parsed ahead of the one being served before we stop reading.
MAX_QUEUED_FRAMES = 8


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.state = server.state
        self.conn = ServerConnection(self.state.config.get_int("socket.request.max.bytes"))
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._paused = False

    # -- protocol callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; duck-type them.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.server.draining:  # accepted from the backlog while stopping
            self._closed = True
            transport.close()
            return
        self.server.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self.server.tasks.add(self._task)
        self._task.add_done_callback(self.server.tasks.discard)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.conn.buffer_updated(nbytes)
        except FrameError as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return
        if self.conn.buffered_frames:
            self._wake.set()
            if self.conn.buffered_frames >= MAX_QUEUED_FRAMES and self.transport:
                self.transport.pause_reading()
                self._paused = True

    def eof_received(self) -> bool | None:
        self._wake.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wake.set()
        self.server.connections.discard(self)

    # -- serving --------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self.transport is not None:
            self.transport.close()

    async def _serve(self) -> None:
        try:
            while not self._closed and not self.server.draining:
                event = self.conn.next_event()
                if event is None:
                    if self._paused and self.transport:
                        self._paused = False
                        self.transport.resume_reading()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if isinstance(event, BadRequest):
                    if not self._answer_bad_request(event):
                        self.close()
                    continue
                await self._handle(event)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing %s after an internal error", self.peer)
            self.close()

    def _answer_bad_request(self, event: BadRequest) -> bool:
        from odradek.broker.handlers.k18_api_versions import unsupported_version_response

        log.info(
            "bad request from %s: api %d v%d %s %s",
            self.peer, event.api_key, event.api_version, event.reason, event.detail,
        )
        corr = event.correlation_id
        if event.api_key == 18 and event.reason == "unsupported_version" and corr is not None:
            self._write(encode_response(18, 0, corr, unsupported_version_response()))
            return True
        return False

    async def _handle(self, req: Request) -> None:
        reg = HANDLERS.get(req.api_key)
        if reg is None or not reg.serves(req.api_version):
            if req.api_key == 18:
                from odradek.broker.handlers.k18_api_versions import unsupported_version_response

                body = unsupported_version_response()
                self._write(encode_response(18, 0, req.correlation_id, body))
                return
            log.info("closing %s: api %d v%d not served", self.peer, req.api_key, req.api_version)
            self.close()
            return
        if reg.rejects(req.api_version):
            assert reg.error_response is not None
            body = reg.error_response(req.body, 35)
        else:
            ctx = RequestContext(self.state, req.api_version, req.header, self.peer)
            try:
                body = await reg.handle(ctx, req.body)
            except CloseConnection as exc:
                log.info("closing %s: %s", self.peer, exc)
                self.close()
                return
        if body is not None and not self._closed:
            self._write(encode_response(req.api_key, req.api_version, req.correlation_id, body))

    def _write(self, parts: list[Any]) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        write_parts(self.transport, parts)


class KafkaServer:
    """Listeners bound to one :class:`BrokerState`."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.connections: set[KafkaConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        """Every connection's serving task until it ends (closed connections too)."""
        self._servers: list[asyncio.Server] = []
        self.draining = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.state.config.listeners():
            server = await loop.create_server(
                lambda: KafkaConnection(self), listener.host or None, listener.port,
                reuse_address=True,
            )
            self._servers.append(server)
        self.state.advertised = self._advertised()

    def _advertised(self) -> list[Any]:
        from odradek.broker.config import Listener

        bound = self.bound_ports()
        out = []
        for i, adv in enumerate(self.state.config.advertised_listeners()):
            port = adv.port or (bound[i] if i < len(bound) else adv.port)
            out.append(Listener(adv.name, adv.host or "127.0.0.1", port))
        return out

    def bound_ports(self) -> list[int]:
        return [s.sockets[0].getsockname()[1] for s in self._servers if s.sockets]

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Stop accepting, let each connection finish the request it is serving
        (long polls are woken to answer now), then close every connection."""
        for server in self._servers:
            server.close()
        self.draining = True
        for part in self.state.partitions.partitions.values():
            part.notify()
        for conn in list(self.connections):
            conn._wake.set()
        tasks = [c._task for c in list(self.connections) if c._task]
        if tasks:
            await asyncio.wait(tasks, timeout=drain_timeout_s)
        for conn in list(self.connections):
            conn.close()
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

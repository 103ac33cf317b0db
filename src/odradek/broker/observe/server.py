"""A small HTTP/1.1 server on asyncio streams, for the metrics and health endpoint.

It runs on the broker's own event loop (asyncio's or uvloop's) and never blocks
it: every read and write is awaited with a deadline, so a slow or hostile
client costs a parked coroutine and a socket, never the Kafka listeners' time.

Per connection, one request at a time (no pipelining past the one being
answered; keep-alive is honoured):

- the head is read up to the empty line, at most
  :data:`~odradek.broker.observe.http.MAX_HEAD_BYTES` (more: 431 and close),
  within ``read_timeout_s`` of its first byte being awaited (else 408 and
  close: a slow client, or an idle keep-alive connection);
- a malformed head (:func:`~odradek.broker.observe.http.parse_head`) is answered
  400 (505) and closed;
- methods other than GET and HEAD are 405 (with ``Allow``); unknown paths are
  the handler's 404;
- the answer is written and drained within ``read_timeout_s`` (a client that
  does not read is dropped);
- at most ``max_connections`` connections at once: one more is closed on accept;
  at most :data:`MAX_REQUESTS_PER_CONNECTION` requests per connection.

The handler is synchronous (it renders in memory: scrape-time gauges must be
cheap) and returns a :class:`Reply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.broker.observe.http import (
    MAX_HEAD_BYTES,
    HttpError,
    HttpRequest,
    parse_head,
    response,
)

log = logging.getLogger("odradek.broker")

MAX_REQUESTS_PER_CONNECTION = 1000
"""Requests answered on one keep-alive connection before it is closed."""


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    extra: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[HttpRequest], Reply]


class HttpServer:
    """``await start()`` binds ``host:port`` (port 0: any); ``await stop()``
    closes the listener and every connection."""

    def __init__(self, host: str, port: int, handler: Handler, *,
                 read_timeout_s: float = 10.0, max_connections: int = 64) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self.refused = 0
        """Connections closed on accept (over ``max_connections``)."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.host or None, self.port, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self.host or '0.0.0.0'}:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._conns.values()):
            writer.close()
        tasks = list(self._conns)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._conns.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._conns) >= self.max_connections:
            self.refused += 1
            writer.close()
            return
        self._conns[task] = writer
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:  # a bug in a handler: the connection goes, the server stays
            log.exception("metrics endpoint: request failed")
        finally:
            self._conns.pop(task, None)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                     ) -> None:
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              self.read_timeout_s)
            except TimeoutError:  # a head begun and never ended, or an idle connection
                await self._send(writer, _error(408, "request head not received in time"))
                return
            except asyncio.LimitOverrunError:
                await self._send(writer, _error(431, "request head too large"))
                return
            except asyncio.IncompleteReadError:
                return  # the client went (idle keep-alive, or a half-sent head)
            try:
                request = parse_head(head)
            except HttpError as exc:
                await self._send(writer, _error(exc.status, exc.message))
                return
            keep = request.keep_alive
            head_only = request.method == "HEAD"
            if request.method not in ("GET", "HEAD"):
                reply = Reply(405, b"only GET and HEAD are served\n",
                              extra=[("Allow", "GET, HEAD")])
                keep = False
            else:
                reply = self.handler(request)
            await self._send(writer, response(reply.status, reply.body, reply.content_type,
                                              head_only=head_only, close=not keep,
                                              extra=reply.extra))
            if not keep:
                return

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.read_timeout_s)


def _error(status: int, message: str) -> bytes:
    return response(status, message.encode() + b"\n", close=True)

"""A request whose send fails while the connection dies leaves no unretrieved
exception behind (asyncio would log it as an internal error with a traceback)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from odradek.client.connection import ClientError, Connection
from odradek.wire.messages.api_versions_request import ApiVersionsRequest


class _StalledWriter:
    """A writer whose drain waits until the test lets it fail."""

    def __init__(self) -> None:
        self.fail = asyncio.Event()

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        await self.fail.wait()
        raise ConnectionResetError("reset by peer")

    def close(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


async def _scenario() -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    reader = asyncio.StreamReader()
    writer = _StalledWriter()
    conn = Connection(reader, writer, "127.0.0.1:1", "test")  # type: ignore[arg-type]
    conn.versions = {ApiVersionsRequest.API_KEY: (0, 3)}
    conn._reading = loop.create_task(conn._read_loop())
    sending = loop.create_task(conn.request(ApiVersionsRequest(), 3))
    await asyncio.sleep(0)  # the request is written; its drain waits
    reader.feed_eof()  # the broker closes: the read loop fails the waiting answer
    await conn._reading
    writer.fail.set()  # then the send fails too
    with pytest.raises(ConnectionResetError):
        await sending
    del sending
    gc.collect()
    await asyncio.sleep(0)
    return reported


def test_a_failed_send_on_a_closed_connection_leaves_nothing_unretrieved() -> None:
    reported = asyncio.run(_scenario())
    assert reported == []


def test_each_waiting_request_gets_its_own_exception() -> None:
    async def scenario() -> list[BaseException]:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        writer = _StalledWriter()
        writer.fail.set()
        conn = Connection(reader, writer, "127.0.0.1:1", "test")  # type: ignore[arg-type]
        futs = [loop.create_future(), loop.create_future()]
        conn._waiting.extend(futs)
        conn._reading = loop.create_task(conn._read_loop())
        reader.feed_eof()
        await conn._reading
        return [f.exception() for f in futs]  # type: ignore[misc]

    first, second = asyncio.run(scenario())
    assert isinstance(first, ClientError) and isinstance(second, ClientError)
    assert first is not second and str(first) == str(second)

"""Responses with file slices arrive byte-exact and in order, mostly by sendfile."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import uvloop

from odradek.broker.net import transfer
from odradek.broker.net.transfer import FileSlice, write_parts


class _File:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    def pread(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        os.close(self.fd)


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def _send(tmp_path: Path, loop_name: str,
          slices: list[tuple[int, int]]) -> tuple[bytes, bytes]:
    """(what arrived, what was expected) for a response of heads and ``slices``."""
    data = os.urandom(3 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    f = _File(path)
    parts: list[object] = []
    expected = b""
    for i, (pos, length) in enumerate(slices):
        head = f"head{i}".encode()
        parts += [head, FileSlice(str(path), pos, length, 0, f)]
        expected += head + data[pos : pos + length]
    parts.append(b"tail")
    expected += b"tail"

    async def main() -> bytes:
        class Sender(asyncio.Protocol):
            def connection_made(self, t: asyncio.BaseTransport) -> None:
                # uvloop's transports are not asyncio.Transport subclasses.
                write_parts(cast(asyncio.Transport, t), parts)
                t.close()

        server = await asyncio.get_running_loop().create_server(Sender, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = await asyncio.wait_for(reader.read(-1), 30)
        writer.close()
        server.close()
        await server.wait_closed()
        return got

    loop = LOOPS[loop_name]()
    try:
        got = loop.run_until_complete(main())
    finally:
        loop.close()
        f.close()
    return got, expected


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_parts_arrive_in_order(tmp_path: Path, loop_name: str) -> None:
    before = transfer.STATS.sendfile_bytes
    got, expected = _send(tmp_path, loop_name, [(0, 1000), (5000, 2 << 20), (100, 1)])
    assert got == expected
    assert transfer.STATS.sendfile_bytes > before  # at least the first slice went by sendfile


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_response_with_few_file_bytes_is_copied_into_one_send(
        tmp_path: Path, loop_name: str) -> None:
    sent, copied = transfer.STATS.sendfile_bytes, transfer.STATS.copied_bytes
    got, expected = _send(tmp_path, loop_name, [(0, 1000), (7000, 20_000), (100, 1)])
    assert got == expected
    assert transfer.STATS.sendfile_bytes == sent
    assert transfer.STATS.copied_bytes - copied == 21_001

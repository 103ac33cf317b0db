"""Writing responses: buffers by ``transport.write``, file slices by ``sendfile``.

A Fetch response's records are slices of segment files
(:class:`~odradek.storage.log.FileSlice`, storage's own type). uvloop has no
``loop.sendfile``, so when the transport's write buffer is empty (every byte
before the slice is already in the kernel)
we call ``os.sendfile`` on the socket directly: the record bytes go from the
page cache to the socket without entering Python. Whatever the socket does not
take at once, or a slice met while the buffer is not empty, is read with
``pread`` and written through the transport (one copy), so ordering is always
kept. ``sendfile`` is skipped where the transport exposes no socket (tests with
fake transports, TLS later).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from odradek.storage.log import FileSlice


@dataclass(frozen=True, slots=True)
class FileRecords:
    """Several file slices sent back to back as one records value."""

    slices: tuple[FileSlice, ...]

    def __len__(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        return b"".join(s.read_bytes() for s in self.slices)


@dataclass(slots=True)
class TransferStats:
    sendfile_bytes: int = 0
    copied_bytes: int = 0


STATS = TransferStats()


def _socket_fd(transport: asyncio.Transport) -> int | None:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        fd = sock.fileno()
    except (OSError, AttributeError):
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def _sendfile(transport: asyncio.Transport, part: FileSlice) -> int:
    """Bytes of ``part`` sent with sendfile (0 if not possible right now)."""
    if not hasattr(os, "sendfile") or transport.get_write_buffer_size() != 0:
        return 0
    out_fd = _socket_fd(transport)
    if out_fd is None:
        return 0
    try:
        in_fd = part.file.fileno()
    except (OSError, AttributeError, NotImplementedError):
        return 0
    sent = 0
    while sent < part.length:
        try:
            n = os.sendfile(out_fd, in_fd, part.position + sent, part.length - sent)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        if n == 0:
            break
        sent += n
    return sent


def _write_slice(transport: asyncio.Transport, part: FileSlice) -> None:
    sent = _sendfile(transport, part)
    STATS.sendfile_bytes += sent
    if sent < part.length:
        rest = part.rest(sent)
        STATS.copied_bytes += rest.length
        transport.write(rest.read_bytes())


def write_parts(transport: asyncio.Transport, parts: list[Any]) -> None:
    """Write a response's parts in order (see the module docstring)."""
    for part in parts:
        if isinstance(part, bytes | bytearray | memoryview):
            transport.write(part)
        elif isinstance(part, FileSlice):
            _write_slice(transport, part)
        elif isinstance(part, FileRecords):
            for piece in part.slices:
                _write_slice(transport, piece)
        else:
            transport.write(part.read_bytes())

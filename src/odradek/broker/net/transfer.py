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
fake transports) and over TLS (the transport encrypts: file bytes are read
and written through it), and for a response with little from files
(:data:`COPY_BELOW`): the slices are read and the response goes in one send,
which on loopback costs less than a second send (a tailing consumer's fetch of
a few records is the common case).

Both would block the event loop on the disk if the bytes were not in the page
cache (a consumer far behind, bytes dropped by
:mod:`odradek.storage.pagecache`). So before a Fetch response is written,
:func:`warm` probes the last and first page (and the middle one of a slice
over 1 MiB) of each slice with
``preadv2(RWF_NOWAIT)``, which fails at once instead of waiting for the disk
(starting the kernel's read-ahead of the page as it does), and reads the
slices that are not cached on an executor thread first.

Finding the slices reads too: a segment's indexes when first used, and the
batch headers after an index entry. :func:`collect_without_waiting` runs that
part of a Fetch with reads that must not wait
(:func:`~odradek.storage.fs.reads_must_not_wait`); a read that would wait
names its bytes, a thread reads them in (with some read-ahead), and the
collection runs again. What can still wait on the loop: a page evicted
between the read-in and its use (read as before).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.storage.fs import ReadWouldBlock, reads_must_not_wait
from odradek.storage.slices import FileSlice

T = TypeVar("T")

_WARM_CHUNK = 1 << 20
COPY_BELOW = 32 * 1024
"""Responses with at most this many bytes from files are copied into one send."""
_ONE_PAGE = 4096


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
    warmed_bytes: int = 0
    """Bytes of fetched slices read into the page cache off the loop first."""
    cold_lookups: int = 0
    """Reads of a Fetch's lookups (indexes, batch headers) that would have waited
    for the disk and were done on a thread instead."""


STATS = TransferStats()


def _socket_fd(transport: asyncio.Transport) -> int | None:
    """The socket to sendfile to; None over TLS (the socket carries encrypted
    records: the bytes must go through the transport) or without a socket."""
    if transport.get_extra_info("sslcontext") is not None:
        return None
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
    """Write a response's parts in order (see the module docstring). A response
    whose file bytes total at most :data:`COPY_BELOW` is read and written whole,
    with one send: on loopback each send costs more than copying that much."""
    if len(parts) > 1:
        files = 0
        for part in parts:
            if not isinstance(part, bytes | bytearray | memoryview):
                files += len(part)
        if files <= COPY_BELOW:
            STATS.copied_bytes += files
            transport.write(b"".join(
                part if isinstance(part, bytes | bytearray | memoryview) else part.read_bytes()
                for part in parts))
            return
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


_probe_buf = bytearray(1)
_nowait = getattr(os, "RWF_NOWAIT", 0)


def _cached(fd: int, position: int) -> bool:
    """Is the byte at ``position`` in the page cache? (True when we cannot tell.)"""
    try:
        os.preadv(fd, [_probe_buf], position, _nowait)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def cold_slices(records: list[FileRecords]) -> list[FileSlice]:
    """The slices whose last, first or (over 1 MiB) middle page is not in the page
    cache (the end first: the read that made the slice has just read its start)."""
    if not _nowait:
        return []
    cold = []
    for rec in records:
        for part in rec.slices:
            try:
                fd = part.file.fileno()
            except (OSError, AttributeError, NotImplementedError):
                continue
            if fd < 0 or not part.length:
                continue
            start, length = part.position, part.length
            if not (_cached(fd, start + length - 1)
                    and (length <= _ONE_PAGE or _cached(fd, start))
                    and (length <= _WARM_CHUNK or _cached(fd, start + length // 2))):
                cold.append(part)
    return cold


def _read_in(cold: Sequence[tuple[str, int, int]]) -> int:
    """Read the (path, position, length) ranges into the page cache (on an executor
    thread): through a descriptor of its own, so the loop's handle cache may
    close theirs. Returns the bytes read."""
    done = 0
    for path, position, length in cold:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # deleted meanwhile: the loop's open descriptor still serves it
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, position, length, os.POSIX_FADV_WILLNEED)
            at, end = position, position + length
            while at < end:
                got = len(os.pread(fd, min(_WARM_CHUNK, end - at), at))
                if not got:
                    break
                at += got
                done += got
        except OSError:
            pass
        finally:
            os.close(fd)
    return done


async def warm(records: list[FileRecords]) -> None:
    """Make sure the slices of a response about to be written are cached, reading
    the cold ones off the loop (see the module docstring)."""
    cold = cold_slices(records)
    if cold:
        loop = asyncio.get_running_loop()
        STATS.warmed_bytes += await loop.run_in_executor(
            None, _read_in, [(p.path, p.position, p.length) for p in cold])


LOOKUP_READ_AHEAD = 128 * 1024
"""The least a lookup's cold read brings in: the header scan goes on past the
first page, and the next fetch of a consumer reads on from there."""
COLD_LOOKUP_TRIES = 16
"""Runs of one collection with reads that must not wait before the last run,
whose reads wait (a page cache that keeps evicting what was just read in)."""


async def collect_without_waiting(collect: Callable[[], T]) -> T:
    """``collect()`` (a Fetch's lookups and reads on the loop) with reads that must
    not wait: when one needs bytes not in the page cache, an executor thread
    reads them in and ``collect`` runs again. ``collect`` must change no state
    before a read that may raise :class:`~odradek.storage.fs.ReadWouldBlock`
    (it is run again from the start)."""
    for _ in range(COLD_LOOKUP_TRIES):
        try:
            with reads_must_not_wait():
                return collect()
        except ReadWouldBlock as cold:
            STATS.cold_lookups += 1
            length = max(cold.length, LOOKUP_READ_AHEAD)
            STATS.warmed_bytes += await asyncio.get_running_loop().run_in_executor(
                None, _read_in, [(cold.path, cold.position, length)])
    return collect()

"""Reads that must not wait (storage/fs.py ``reads_must_not_wait``) against the kernel.

Pages are dropped with ``fsync`` + ``POSIX_FADV_DONTNEED`` (whole MiBs: the kernel
keeps a file's pages in large folios, and drops only whole ones) and looked at
with ``mincore`` (tests/support/pagecache.py), which warms nothing. Inside the mode a
read of cached bytes returns them, a read reaching a dropped page raises
:class:`ReadWouldBlock` naming exactly the bytes from that page on, and the
mode is per thread. The in-memory file system never waits.

A non-waiting read of a dropped page starts the kernel's readahead for it
before it gives up; on a fast disk, with the reader descheduled in between, that
read can finish first and the bytes come back (seen under load in CI). So a
cold read is tried on freshly dropped pages until it is refused (at most
:data:`TRIES` times), and every try that is not refused must return the right
bytes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.storage import MemoryFileSystem, OsFileSystem
from odradek.storage.fs import ReadWouldBlock, reads_must_not_wait
from tests.support.pagecache import PAGE, resident

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="Linux only")


MiB = 1 << 20
TRIES = 10


def _file(tmp_path: Path, mib: int) -> tuple[Path, bytes]:
    path = tmp_path / "seg.log"
    data = os.urandom(mib * MiB)
    path.write_bytes(data)
    return path, data


def _drop(path: Path, start: int, end: int) -> None:
    """Drop [start, end) of ``path`` from the page cache (a few tries: a page still
    in another CPU's batch of new pages is not dropped at once)."""
    for _ in range(20):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        if not any(resident(path, p) for p in range(start, end, PAGE)):
            return
    pytest.skip("the kernel kept pages asked to be dropped")


def _refused(path: Path, start: int, end: int, read: Callable[[], bytes],
             expected: bytes) -> ReadWouldBlock:
    """Drop [start, end) and run ``read`` in the non-waiting mode until it is
    refused; return the refusal. A try the kernel's readahead won must return
    ``expected``."""
    for _ in range(TRIES):
        _drop(path, start, end)
        try:
            with reads_must_not_wait():
                got = read()
        except ReadWouldBlock as refusal:
            return refusal
        assert got == expected
    pytest.fail(f"a read of dropped pages was never refused in {TRIES} tries")


def test_cached_bytes_are_read_and_a_dropped_page_is_named(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 8)
    handle = OsFileSystem().open(str(path))
    edge = 4 * MiB
    try:
        with reads_must_not_wait():
            assert handle.pread(100, 2 * PAGE) == data[100:100 + 2 * PAGE]
        # One cached page, then a dropped one.
        cold = _refused(path, edge, 8 * MiB, lambda: handle.pread(edge - PAGE, 2 * PAGE),
                        data[edge - PAGE:edge + PAGE])
        assert (cold.path, cold.position, cold.length) == (str(path), edge, PAGE)
        assert not isinstance(cold, OSError)  # no IO-error handler takes it for a failure
        # Outside the mode the same read waits for the disk and returns the bytes.
        assert handle.pread(edge - PAGE, 2 * PAGE) == data[edge - PAGE:edge + PAGE]
    finally:
        handle.close()


def test_a_read_past_the_end_returns_what_there_is(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 1)
    handle = OsFileSystem().open(str(path))
    try:
        with reads_must_not_wait():
            assert handle.pread(MiB - PAGE, 4 * PAGE) == data[MiB - PAGE:]
            assert handle.pread(2 * MiB, 100) == b""
    finally:
        handle.close()


def test_a_cold_whole_file_read_names_the_file(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 1)
    fs = OsFileSystem()
    refusal = _refused(path, 0, MiB, lambda: fs.read_file(str(path)), data)
    assert (refusal.path, refusal.position) == (str(path), 0)
    assert fs.read_file(str(path)) == data
    with reads_must_not_wait():
        assert fs.read_file(str(path)) == data  # cached now


def test_the_mode_is_per_thread_and_ends_with_the_block(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 1)
    handle = OsFileSystem().open(str(path))
    got: list[bytes] = []
    try:
        with reads_must_not_wait():
            _drop(path, 0, MiB)
            reader = threading.Thread(target=lambda: got.append(handle.pread(0, MiB)))
            reader.start()
            reader.join()
            assert got == [data]  # the other thread's read waited for the disk
        refusal = _refused(path, 0, MiB, lambda: handle.pread(0, 10), data[:10])
        assert refusal.position == 0
        assert handle.pread(0, 10) == data[:10]
    finally:
        handle.close()


def test_a_file_system_that_cannot_tell_is_read_as_usual() -> None:
    """tmpfs answers ``RWF_NOWAIT`` with EOPNOTSUPP (its files are in memory): the
    read is done as usual instead of failing (a Fetch on a tmpfs data dir)."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm")
    path = shm / f"odradek-nowait-{os.getpid()}"
    path.write_bytes(b"abc" * 1000)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
            pytest.skip("/dev/shm answers RWF_NOWAIT here")
        except OSError:
            pass
        finally:
            os.close(fd)
        fs = OsFileSystem()
        handle = fs.open(str(path))
        try:
            with reads_must_not_wait():
                assert handle.pread(3, 6) == b"abcabc"
                assert fs.read_file(str(path)) == b"abc" * 1000
        finally:
            handle.close()
    finally:
        path.unlink()


def test_the_in_memory_file_system_never_waits() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/d")
    fs.write_file("/d/f", b"abc")
    with reads_must_not_wait():
        assert fs.read_file("/d/f") == b"abc"
        assert fs.open("/d/f").pread(1, 5) == b"bc"

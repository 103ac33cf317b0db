"""The file-system seam: every byte storage reads or writes goes through here.

Two implementations: :class:`OsFileSystem` (real files, positional
``pread``/``pwritev``, no user-space buffering, so a write is in the page cache
when it returns) and :class:`~odradek.storage.memfs.MemoryFileSystem` (a model
that remembers what has been synced, can fail or tear the next write or sync,
and can "crash", dropping whatever was not synced).

Reads that must not wait: inside :func:`reads_must_not_wait` (per thread), the
real file system's reads take only what is in the page cache (``preadv2`` with
``RWF_NOWAIT``) and raise :class:`ReadWouldBlock`, naming the bytes, where they
would wait for the disk. The event loop reads a Fetch's batch headers and
indexes that way and has a thread read the named bytes in first
(:mod:`odradek.broker.net.transfer`). The in-memory file system never waits.

Paths are POSIX strings. ``fsync`` and ``sync_dir`` take paths rather than
handles so that a flush running on an executor thread needs none of the log's
handles: on Linux an ``fsync`` through any descriptor of a file flushes the
file. Everything that can fail raises :class:`OSError` (``FileNotFoundError``
for a missing path).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import posixpath
import shutil
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from odradek.common import crashpoints
from odradek.wire.primitives import Buffer

_IOV_MAX = 512
_RWF_NOWAIT: int = getattr(os, "RWF_NOWAIT", 0)


class ReadWouldBlock(Exception):
    """A read inside :func:`reads_must_not_wait` needs bytes [position, position +
    length) of ``path`` that are not in the page cache. Not an ``OSError``, so no
    handler of IO errors on the way takes it for one: nothing failed."""

    def __init__(self, path: str, position: int, length: int) -> None:
        super().__init__(f"{path}: [{position}, {position + length}) is not cached")
        self.path, self.position, self.length = path, position, length


class _ReadMode(threading.local):
    nowait = False


_mode = _ReadMode()


class reads_must_not_wait:
    """Within the block, on this thread, :class:`OsFileSystem` reads raise
    :class:`ReadWouldBlock` instead of waiting for the disk (see the module
    docstring). Where the kernel cannot tell (no ``RWF_NOWAIT``) reads wait as
    usual. (A class, not a generator: every Fetch enters it.)"""

    __slots__ = ("_before",)

    def __enter__(self) -> None:
        self._before = _mode.nowait
        _mode.nowait = bool(_RWF_NOWAIT)

    def __exit__(self, *exc: object) -> None:
        _mode.nowait = self._before


def _pread_nowait(fd: int, path: str, position: int, length: int) -> bytes:
    """What ``pread`` returns, taken from the page cache only; raises
    :class:`ReadWouldBlock` for the first byte that is not there."""
    buf = bytearray(length)
    try:
        n = os.preadv(fd, (buf,), position, _RWF_NOWAIT)
    except BlockingIOError:
        raise ReadWouldBlock(path, position, length) from None
    except OSError as e:
        if e.errno not in _NOWAIT_UNSUPPORTED:
            raise
        # A file system that cannot tell (tmpfs: EOPNOTSUPP) keeps its files in
        # memory anyway: read as usual.
        return os.pread(fd, length, position)
    if n == length:
        return bytes(buf)
    # Short: the end of the file, or cached bytes followed by some that are not.
    got = n
    with memoryview(buf) as view:
        while n and got < length:
            try:
                n = os.preadv(fd, (view[got:],), position + got, _RWF_NOWAIT)
            except BlockingIOError:
                raise ReadWouldBlock(path, position + got, length - got) from None
            got += n
    del buf[got:]
    return bytes(buf)


_NOWAIT_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS})


class FileHandle(Protocol):
    """An open file. Writes are positional; there is no shared file offset."""

    def pread(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (fewer only at end of file)."""
        ...

    def pwrite(self, position: int, chunks: Sequence[Buffer]) -> None:
        """Write the concatenation of ``chunks`` at ``position``, all of it or raise."""
        ...

    def truncate(self, size: int) -> None:
        """Set the file's size; blocks reserved past the new end (:meth:`allocate`)
        are given back too."""
        ...

    def allocate(self, position: int, length: int) -> None:
        """Advice: reserve disk blocks for bytes [position, position + length) without
        changing the file's size (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``),
        so later writes there find their blocks allocated. Never raises; a no-op is
        a correct implementation. Reads, sizes and :meth:`truncate` are unchanged."""
        ...

    def size(self) -> int: ...

    def fileno(self) -> int:
        """The OS descriptor (for ``sendfile``), or -1 when there is none."""
        ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    def open(self, path: str, *, create: bool = False) -> FileHandle:
        """Open for reading and writing; ``create`` makes a missing file."""
        ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: Buffer) -> None:
        """Create or replace ``path`` with ``data``. Not synced."""
        ...

    def fsync(self, path: str) -> None:
        """Make the file's data durable."""
        ...

    def sync_dir(self, path: str) -> None:
        """Make the directory's entries (creations, renames, removals) durable."""
        ...

    def sync_all(self, path: str) -> None:
        """Make everything written to the file system holding ``path`` durable,
        files and directory entries alike (Linux ``syncfs``): one wait for many
        small files, at the price of also writing back every other dirty page
        of that file system. OSError when it cannot."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def subdirs(self, path: str) -> list[str]:
        """The names of ``path``'s subdirectories (a symbolic link to one counts)."""
        ...

    def makedirs(self, path: str) -> None:
        """Create ``path`` and missing parents; no error if it exists."""
        ...

    def remove(self, path: str) -> None: ...

    def rmtree(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomic rename, replacing ``dst`` if it exists."""
        ...

    def size(self, path: str) -> int: ...

    def mtime_ms(self, path: str) -> int: ...

    def drop_cache(self, path: str, start: int, end: int, keep: bool = False) -> None:
        """Advice: write back bytes [start, end) of ``path`` and drop them from the
        page cache (:mod:`odradek.storage.pagecache`); with ``keep``, only start
        their write-back (the pages stay cached, clean once written). The file
        is unchanged and nothing is made durable (no fsync): a no-op is a
        correct implementation."""
        ...


class OsFileHandle:
    __slots__ = ("_fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    def pread(self, position: int, length: int) -> bytes:
        if _mode.nowait:
            return _pread_nowait(self._fd, self.path, position, length)
        out = os.pread(self._fd, length, position)
        if len(out) == length or not out:
            return out
        # A regular file returns short reads only at its end, but be exact.
        parts = [out]
        got = len(out)
        while got < length:
            more = os.pread(self._fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def pwrite(self, position: int, chunks: Sequence[Buffer]) -> None:
        if len(chunks) <= _IOV_MAX:
            # One call almost always writes everything to a regular file.
            total = 0
            for chunk in chunks:
                total += len(chunk)
            written = os.pwritev(self._fd, chunks, position)
            if written == total:
                return
            skip = written
        else:
            skip = 0
        pending = [memoryview(c) for c in chunks if len(c)]
        while skip and pending:
            head = pending[0]
            if skip >= len(head):
                skip -= len(head)
                position += len(head)
                pending.pop(0)
            else:
                pending[0] = head[skip:]
                position += skip
                skip = 0
        while pending:
            batch = pending[:_IOV_MAX]
            written = os.pwritev(self._fd, batch, position)
            if written <= 0:
                raise OSError(errno.EIO, f"pwritev wrote {written} bytes to {self.path}")
            position += written
            # Drop what was written, keep the unwritten tail of a partly written chunk.
            while written and pending:
                head = pending[0]
                if written >= len(head):
                    written -= len(head)
                    pending.pop(0)
                else:
                    pending[0] = head[written:]
                    written = 0

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def allocate(self, position: int, length: int) -> None:
        if length > 0:
            _fallocate_keep_size(self._fd, position, length)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


_SMALL_READ = 64 * 1024
""":meth:`OsFileSystem.read_file`'s first read: the whole of any checkpoint."""
_LARGE_READ = 1 << 20


class OsFileSystem:
    """Real files."""

    def open(self, path: str, *, create: bool = False) -> OsFileHandle:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        return OsFileHandle(path, os.open(path, flags, 0o644))

    def read_file(self, path: str) -> bytes:
        if _mode.nowait:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return _pread_nowait(fd, path, 0, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        # Plain descriptors, not a file object: a tenth of the cost for the small
        # files a start-up reads per partition (a few microseconds each).
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = [os.read(fd, _SMALL_READ)]
            while len(chunks[-1]) == (_SMALL_READ if len(chunks) == 1 else _LARGE_READ):
                chunks.append(os.read(fd, _LARGE_READ))
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        finally:
            os.close(fd)

    def write_file(self, path: str, data: Buffer) -> None:
        with open(path, "wb") as f:
            f.write(data)

    def fsync(self, path: str) -> None:
        crashpoints.fsync_delay()  # a slow disk, when a chaos test asks for one
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_dir(self, path: str) -> None:
        crashpoints.fsync_delay()
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_all(self, path: str) -> None:
        crashpoints.fsync_delay()
        syncfs = _syncfs()
        if syncfs is None:
            raise OSError(errno.ENOSYS, "syncfs is not available", path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), path)
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def subdirs(self, path: str) -> list[str]:
        # The entries' types come with the listing: no stat per entry (but for
        # symbolic links, and file systems that do not give types).
        with os.scandir(path) as entries:
            return [e.name for e in entries if e.is_dir()]

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime_ms(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def drop_cache(self, path: str, start: int, end: int, keep: bool = False) -> None:
        if end <= start or not hasattr(os, "posix_fadvise"):
            return
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if keep:
                _write_back(fd, start, end - start, _SYNC_FILE_RANGE_WRITE)
                return
            _write_back(fd, start, end - start)
            os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _libc_function(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    """``name`` from the C library this interpreter runs on (ctypes; None where
    there is none). ``CDLL(None)`` is the process's own symbols, which include
    libc, without ``find_library``'s ``ldconfig`` subprocess."""
    import ctypes

    try:
        func = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    func.argtypes = argtypes
    func.restype = ctypes.c_int
    return cast("Callable[..., int]", func)


def _no_op(*args: int) -> int:
    return 0


_FALLOC_FL_KEEP_SIZE = 1
_fallocate: Callable[..., int] | None = None


def _fallocate_keep_size(fd: int, offset: int, length: int) -> None:
    """Linux ``fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length)`` (``os.posix_fallocate``
    would change the size): unwritten extents past the end, so reads still end
    at the file's size. Failures (no space, a file system without it, not Linux)
    are ignored: the write that follows allocates its blocks anyway."""
    global _fallocate
    if _fallocate is None:
        import ctypes

        _fallocate = _libc_function(
            "fallocate", [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]) or _no_op
    _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length)


_SYNC_FILE_RANGE_ALL = 1 | 2 | 4
"""SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER: the range's dirty pages
are written and clean when the call returns (no fsync: no metadata, no device flush)."""
_SYNC_FILE_RANGE_WRITE = 2
"""SYNC_FILE_RANGE_WRITE alone: start the write-back of the range's dirty pages
and return (pages already under write-back are not waited for)."""
_sync_file_range: Callable[..., int] | None = None


def _write_back(fd: int, offset: int, length: int, flags: int = _SYNC_FILE_RANGE_ALL) -> None:
    """Write the range's dirty pages back and wait (Linux ``sync_file_range``,
    through ctypes: the os module has no binding), or with ``flags``
    :data:`_SYNC_FILE_RANGE_WRITE` only start it. Elsewhere nothing: the
    following ``POSIX_FADV_DONTNEED`` then drops only pages already clean."""
    global _sync_file_range
    import ctypes

    if _sync_file_range is None:
        _sync_file_range = _libc_function(
            "sync_file_range", [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint],
        ) or _no_op
    if _sync_file_range(fd, offset, length, flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def parent_dir(path: str) -> str:
    return posixpath.dirname(posixpath.normpath(path)) or "/"


def makedirs_durable(fs: FileSystem, path: str) -> bool:
    """Create ``path`` and any missing parents, syncing each new entry's parent
    directory so the whole chain survives a crash. Returns whether anything was made."""
    missing: list[str] = []
    probe = posixpath.normpath(path)
    while not fs.exists(probe):
        missing.append(probe)
        parent = parent_dir(probe)
        if parent == probe:
            break
        probe = parent
    if not missing:
        return False
    fs.makedirs(path)
    for created in reversed(missing):
        fs.sync_dir(parent_dir(created))
    return True


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs(fd)`` (Linux), or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return cast(Callable[[int], int], fn)

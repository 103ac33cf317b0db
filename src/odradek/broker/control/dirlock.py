"""One broker per data directory: an exclusive lock on ``<dir>/.lock``.

Two brokers appending to the same partition files lose acknowledged records
(each assigns the offsets the other already gave out), so a broker takes
``flock(LOCK_EX | LOCK_NB)`` on ``.lock`` in every directory it keeps (each of
``log.dirs`` and ``metadata.log.dir``), as Kafka does, before it reads or
writes anything there, and holds it for the life of the process. The kernel
drops the lock when the process dies, ``kill -9`` included, so no stale lock
is ever left behind.

File format: ``.lock`` holds the decimal pid of the process holding it and a
newline, written after the lock is taken; it is only read to name the holder
in the refusal. A directory that does not exist yet is created first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from odradek.broker.control.meta_properties import DataDirError

LOCK_FILE = ".lock"


class DirLock:
    """The lock of one directory, held while this object's file is open."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text().strip())
        return f"process {pid}"
    return "another process"


def lock_dir(directory: Path) -> DirLock:
    """Take ``directory``'s lock, or raise DataDirError naming it and its holder."""
    if directory.exists() and not directory.is_dir():
        raise DataDirError(f"{directory} is a file, not a directory: log.dirs and "
                           f"metadata.log.dir name directories")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise DataDirError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DataDirError(
                f"{directory} is in use by {_holder(path)} (its {LOCK_FILE} is locked): stop "
                f"that broker first, or give this one other log.dirs") from None
        raise DataDirError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return DirLock(directory, fd)


def lock_dirs(directories: list[Path]) -> list[DirLock]:
    """Lock every directory (each once); on a refusal the ones taken are released."""
    taken: list[DirLock] = []
    try:
        for directory in dict.fromkeys(d.resolve() for d in directories):
            taken.append(lock_dir(directory))
    except BaseException:
        for lock in taken:
            lock.release()
        raise
    return taken

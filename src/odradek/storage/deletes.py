"""Files of segments taken out of a log, waiting to be removed.

A segment taken out (retention, DeleteRecords, truncation, a cleaner swap) is
renamed ``*.deleted`` at once and its files removed ``file.delete.delay.ms``
later, so a ``sendfile`` already under way finishes on the open descriptor.
:class:`DeleteQueue` holds the renamed paths and when each is due (monotonic
milliseconds). The log manager takes the due ones and removes them off the
event loop (:class:`RemoveDeletedJob`, which also removes the directories of
deleted logs); a delay of 0 removes them at once.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.storage.fs import FileSystem


class DeleteQueue:
    """One log's ``*.deleted`` files and when each may go."""

    __slots__ = ("fs", "pending")

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.pending: tuple[tuple[int, list[str]], ...] = ()
        """(monotonic ms due, paths), in the order they were taken out; a tuple,
        replaced when it changes (rarely), so an idle log shares the empty one."""

    def add(self, paths: list[str], due_ms: int) -> None:
        self.pending = (*self.pending, (due_ms, paths))

    def take_due(self, now_ms: int) -> tuple[list[str], int | None]:
        """The paths due at ``now_ms``, taken off the queue for the caller to remove,
        and when the next one is due (None: nothing pending)."""
        due_paths: list[str] = []
        remaining: list[tuple[int, list[str]]] = []
        for due, paths in self.pending:
            if due > now_ms:
                remaining.append((due, paths))
            else:
                due_paths.extend(paths)
        self.pending = tuple(remaining)
        return due_paths, min((due for due, _ in remaining), default=None)

    def run_due(self, now_ms: int) -> int | None:
        """Remove the paths due at ``now_ms`` here and now; when the next is due."""
        paths, next_due = self.take_due(now_ms)
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                self.fs.remove(path)
        return next_due

    def relocate(self, dir_path: str) -> None:
        """The partition directory was renamed ``dir_path``."""
        self.pending = tuple(
            (due, [posixpath.join(dir_path, posixpath.basename(p)) for p in paths])
            for due, paths in self.pending)



class DeletedDirs:
    """The directories of deleted logs (renamed ``...-delete``) and when each may
    go (monotonic milliseconds); the log manager removes the due ones off the
    loop (:class:`RemoveDeletedJob`)."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.pending: list[tuple[int, str]] = []
        """(monotonic ms due, directory), in the order they were deleted."""

    def add(self, path: str, due_ms: int) -> None:
        self.pending.append((due_ms, path))

    def take_due(self, now_ms: int) -> list[str]:
        """The directories due at ``now_ms``, taken off for the caller to remove."""
        due_paths = [path for due, path in self.pending if due <= now_ms]
        if due_paths:
            self.pending = [(due, path) for due, path in self.pending if due > now_ms]
        return due_paths

    def due_times(self) -> list[int]:
        return [due for due, _ in self.pending]

    def retry(self, paths: list[str], due_ms: int) -> None:
        """Try those of ``paths`` still there again at ``due_ms``."""
        self.pending.extend((due_ms, path) for path in paths if self.fs.exists(path))

    def run_due(self, now_ms: int) -> int | None:
        """Remove the directories due at ``now_ms`` here and now; when the next is due."""
        remaining = []
        for due, path in self.pending:
            if due > now_ms:
                remaining.append((due, path))
            elif self.fs.exists(path):
                self.fs.rmtree(path)
        self.pending = remaining
        return min((due for due, _ in remaining), default=None)


@dataclass
class RemoveDeletedJob:
    """Remove what ``file.delete.delay.ms`` has let go, off the loop: the
    directories of deleted logs (``paths``) and the ``*.deleted`` files of
    segments dropped by retention (``files``). Unlinking a large file drops its
    page cache and can take long enough to stall every connection. After a
    failure the directories are tried again a minute later; a leftover
    segment file is only disk space until the log directory goes."""

    fs: FileSystem
    paths: list[str]
    retry: Callable[[list[str]], None]
    files: list[str] = field(default_factory=list)

    def run(self) -> None:
        for file in self.files:
            with contextlib.suppress(FileNotFoundError):
                self.fs.remove(file)
        for path in self.paths:
            if self.fs.exists(path):
                self.fs.rmtree(path)

    def complete(self, error: BaseException | None = None) -> None:
        if error is not None:
            self.retry(self.paths)

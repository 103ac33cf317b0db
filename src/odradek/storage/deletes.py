"""Files of segments taken out of a log, waiting to be removed.

A segment taken out (retention, DeleteRecords, truncation, a cleaner swap) is
renamed ``*.deleted`` at once and its files removed ``file.delete.delay.ms``
later, so a ``sendfile`` already under way finishes on the open descriptor.
:class:`DeleteQueue` holds the renamed paths and when each is due (monotonic
milliseconds). The log manager takes the due ones and removes them off the
event loop; a delay of 0 removes them at once.
"""

from __future__ import annotations

import contextlib
import posixpath

from odradek.storage.fs import FileSystem


class DeleteQueue:
    """One log's ``*.deleted`` files and when each may go."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.pending: list[tuple[int, list[str]]] = []
        """(monotonic ms due, paths), in the order they were taken out."""

    def add(self, paths: list[str], due_ms: int) -> None:
        self.pending.append((due_ms, paths))

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
        self.pending = remaining
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
        self.pending = [(due, [posixpath.join(dir_path, posixpath.basename(p)) for p in paths])
                        for due, paths in self.pending]

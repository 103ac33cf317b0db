"""A capped, least-recently-used set of open files.

Kafka keeps every segment's files open and asks for a large ``ulimit -n``. With
10,000 partitions of several segments each, that is tens of thousands of
descriptors, so storage opens files lazily through this cache and closes the
least recently used one when more than ``max_open`` are open. A closed file is
simply reopened on its next use: all IO is positional, so nothing is lost.

The cache is used from one thread (the broker's event loop). Flushes on other
threads never take handles from it; they fsync by path.
"""

from __future__ import annotations

import posixpath
from collections import OrderedDict

from odradek.storage.fs import FileHandle, FileSystem


class HandleCache:
    def __init__(self, fs: FileSystem, max_open: int = 4096) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.fs = fs
        self.max_open = max_open
        self._open: OrderedDict[str, FileHandle] = OrderedDict()
        self._by_dir: dict[str, set[str]] = {}
        """The open paths of each directory (``discard_under`` looks only there)."""
        self.opens = 0
        self.evictions = 0

    def get(self, path: str, *, create: bool = False) -> FileHandle:
        handle = self._open.get(path)
        if handle is not None:
            self._open.move_to_end(path)
            return handle
        handle = self.fs.open(path, create=create)
        self.opens += 1
        self._open[path] = handle
        self._by_dir.setdefault(posixpath.dirname(path), set()).add(path)
        while len(self._open) > self.max_open:
            old, victim = self._open.popitem(last=False)
            self._forget(old)
            self.evictions += 1
            victim.close()
        return handle

    def _forget(self, path: str) -> None:
        directory = posixpath.dirname(path)
        paths = self._by_dir.get(directory)
        if paths is not None:
            paths.discard(path)
            if not paths:
                del self._by_dir[directory]

    def discard(self, path: str) -> None:
        """Close ``path`` if open (before it is renamed or removed)."""
        handle = self._open.pop(path, None)
        if handle is not None:
            self._forget(path)
            handle.close()

    def discard_under(self, dir_path: str) -> None:
        """Close every open file directly in ``dir_path`` (a partition directory:
        segment files are never in subdirectories)."""
        for path in list(self._by_dir.get(dir_path.rstrip("/") or "/", ())):
            self.discard(path)

    def close_all(self) -> None:
        self._by_dir.clear()
        while self._open:
            _, handle = self._open.popitem()
            handle.close()

    @property
    def open_count(self) -> int:
        return len(self._open)

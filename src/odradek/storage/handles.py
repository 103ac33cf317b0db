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

from collections import OrderedDict

from odradek.storage.fs import FileHandle, FileSystem


class HandleCache:
    def __init__(self, fs: FileSystem, max_open: int = 4096) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.fs = fs
        self.max_open = max_open
        self._open: OrderedDict[str, FileHandle] = OrderedDict()
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
        while len(self._open) > self.max_open:
            _, victim = self._open.popitem(last=False)
            self.evictions += 1
            victim.close()
        return handle

    def discard(self, path: str) -> None:
        """Close ``path`` if open (before it is renamed or removed)."""
        handle = self._open.pop(path, None)
        if handle is not None:
            handle.close()

    def discard_under(self, dir_path: str) -> None:
        prefix = dir_path.rstrip("/") + "/"
        for path in [p for p in self._open if p.startswith(prefix)]:
            self.discard(path)

    def close_all(self) -> None:
        while self._open:
            _, handle = self._open.popitem()
            handle.close()

    @property
    def open_count(self) -> int:
        return len(self._open)

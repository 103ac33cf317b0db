"""An in-memory file system that knows what a crash would lose.

The model, per file: ``data`` (what a reader sees now, the page cache) and
``synced`` (what ``fsync`` last made durable). Per directory: ``children`` (the
names a reader sees now) and ``durable`` (the names as of the last
``sync_dir``). Creating, renaming or removing a name changes ``children`` only;
``sync_dir`` copies ``children`` to ``durable``.

:meth:`MemoryFileSystem.crash` is a power cut: every directory goes back to its
durable names and every file to its synced bytes. With a random generator it is
meaner and more realistic: a file that only grew since its last sync keeps a
random prefix of the unsynced tail (a torn write), optionally followed by
garbage (the inode grew but the block was never written, as Kafka's docs warn).

Faults: :meth:`fail_next_write` (the next matching write stores ``keep_bytes``
of its data, then raises) and :meth:`fail_next_sync` (the next matching fsync or
directory sync raises and syncs nothing). Handles opened before a crash raise
``EBADF`` afterwards. All methods are thread safe, because flushes run on an
executor thread.
"""

from __future__ import annotations

import errno
import posixpath
import random
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from odradek.common.clock import Clock
from odradek.wire.primitives import Buffer


class _File:
    __slots__ = ("allocated", "data", "mtime_ms", "synced")

    def __init__(self, mtime_ms: int) -> None:
        self.data = bytearray()
        self.synced = b""
        self.mtime_ms = mtime_ms
        self.allocated = 0
        """End of the blocks reserved by ``allocate`` (as ext4 keeps them past the
        size until a truncate); only :meth:`MemoryFileSystem.allocated` reads it."""


class _Dir:
    __slots__ = ("children", "durable")

    def __init__(self) -> None:
        self.children: dict[str, _File | _Dir] = {}
        self.durable: dict[str, _File | _Dir] = {}


@dataclass
class _Fault:
    kind: str  # "write" | "sync"
    path_contains: str
    keep_bytes: int
    err: int


def _oserror(err: int, path: str) -> OSError:
    if err == errno.ENOENT:
        return FileNotFoundError(err, "No such file or directory", path)
    return OSError(err, f"injected or model error {errno.errorcode.get(err, err)}", path)


def _split(path: str) -> list[str]:
    norm = posixpath.normpath("/" + path)
    return [p for p in norm.split("/") if p]


class MemoryFileHandle:
    __slots__ = ("_closed", "_fs", "_generation", "_node", "path")

    def __init__(self, fs: MemoryFileSystem, path: str, node: _File, generation: int) -> None:
        self._fs = fs
        self.path = path
        self._node = node
        self._generation = generation
        self._closed = False

    def _check(self) -> _File:
        if self._closed or self._generation != self._fs.generation:
            raise _oserror(errno.EBADF, self.path)
        return self._node

    def pread(self, position: int, length: int) -> bytes:
        with self._fs.lock:
            node = self._check()
            return bytes(node.data[position : position + length])

    def pwrite(self, position: int, chunks: Sequence[Buffer]) -> None:
        data = b"".join(chunks)
        with self._fs.lock:
            node = self._check()
            fault = self._fs.take_fault("write", self.path)
            if fault is not None:
                data = data[: fault.keep_bytes]
            if position > len(node.data):
                node.data.extend(b"\x00" * (position - len(node.data)))
            node.data[position : position + len(data)] = data
            node.mtime_ms = self._fs.now_ms()
            self._fs.writes += 1
            if fault is not None:
                raise _oserror(fault.err, self.path)

    def truncate(self, size: int) -> None:
        with self._fs.lock:
            node = self._check()
            if size < len(node.data):
                del node.data[size:]
            else:
                node.data.extend(b"\x00" * (size - len(node.data)))
            node.allocated = size

    def allocate(self, position: int, length: int) -> None:
        with self._fs.lock:
            node = self._check()
            node.allocated = max(node.allocated, position + length)

    def size(self) -> int:
        with self._fs.lock:
            return len(self._check().data)

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        with self._fs.lock:
            if not self._closed:
                self._closed = True
                self._fs.open_handles -= 1


class MemoryFileSystem:
    def __init__(self, clock: Clock | None = None) -> None:
        self.lock = threading.RLock()
        self._clock = clock
        self._root = _Dir()
        self._faults: list[_Fault] = []
        self.generation = 0
        self.open_handles = 0
        self.writes = 0
        self.syncs = 0
        self.dropped: list[tuple[str, int, int]] = []
        self.written_back: list[tuple[str, int, int]] = []
        """Ranges whose write-back a caller started, keeping them cached."""

    # -- model plumbing ---------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock.now_ms() if self._clock is not None else 0

    def _lookup(self, path: str) -> _File | _Dir:
        node: _File | _Dir = self._root
        for part in _split(path):
            if not isinstance(node, _Dir) or part not in node.children:
                raise _oserror(errno.ENOENT, path)
            node = node.children[part]
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = _split(path)
        if not parts:
            raise _oserror(errno.EINVAL, path)
        parent = self._lookup("/" + "/".join(parts[:-1]))
        if not isinstance(parent, _Dir):
            raise _oserror(errno.ENOTDIR, path)
        return parent, parts[-1]

    def _file(self, path: str) -> _File:
        node = self._lookup(path)
        if not isinstance(node, _File):
            raise _oserror(errno.EISDIR, path)
        return node

    def take_fault(self, kind: str, path: str) -> _Fault | None:
        for i, fault in enumerate(self._faults):
            if fault.kind == kind and fault.path_contains in path:
                return self._faults.pop(i)
        return None

    # -- fault injection ----------------------------------------------------------

    def fail_next_write(
        self, path_contains: str = "", *, keep_bytes: int = 0, err: int = errno.ENOSPC
    ) -> None:
        """The next write to a path containing ``path_contains`` stores only its
        first ``keep_bytes`` bytes, then raises ``OSError(err)``."""
        with self.lock:
            self._faults.append(_Fault("write", path_contains, keep_bytes, err))

    def fail_next_sync(self, path_contains: str = "", *, err: int = errno.EIO) -> None:
        """The next fsync or directory sync of a matching path raises and syncs nothing."""
        with self.lock:
            self._faults.append(_Fault("sync", path_contains, 0, err))

    def clear_faults(self) -> None:
        with self.lock:
            self._faults.clear()

    def crash(self, rng: random.Random | None = None, *, garbage: bool = False) -> None:
        """Lose everything not synced. See the module docstring for ``rng`` and ``garbage``."""
        with self.lock:
            self.generation += 1
            self.open_handles = 0
            self._faults.clear()
            seen: set[int] = set()
            self._crash_dir(self._root, rng, garbage, seen)

    def _crash_dir(self, d: _Dir, rng: random.Random | None, garbage: bool, seen: set[int]) -> None:
        d.children = dict(d.durable)
        for node in d.children.values():
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, _Dir):
                self._crash_dir(node, rng, garbage, seen)
            else:
                self._crash_file(node, rng, garbage)

    @staticmethod
    def _crash_file(f: _File, rng: random.Random | None, garbage: bool) -> None:
        synced = f.synced
        data = bytearray(synced)
        grew = len(f.data) > len(synced) and f.data.startswith(synced)
        if rng is not None and grew:
            tail = len(f.data) - len(synced)
            data += f.data[len(synced) : len(synced) + rng.randint(0, tail)]
            if garbage and rng.random() < 0.5:
                data += rng.randbytes(rng.randint(1, 64))
        f.data = data
        f.synced = bytes(data)

    # -- direct edits of the durable state, for crash tests ---------------------------

    def poke(self, path: str, position: int, data: bytes) -> None:
        """Overwrite bytes on 'disk' (data and synced alike), as bit rot would."""
        with self.lock:
            node = self._file(path)
            node.data[position : position + len(data)] = data
            node.synced = bytes(node.data)

    def cut(self, path: str, size: int) -> None:
        """Truncate on 'disk' (data and synced alike)."""
        with self.lock:
            node = self._file(path)
            del node.data[size:]
            node.synced = bytes(node.data)

    def walk_files(self) -> Iterator[str]:
        """Every file path, depth first."""
        with self.lock:
            out: list[str] = []
            stack: list[tuple[str, _Dir]] = [("", self._root)]
            while stack:
                prefix, d = stack.pop()
                for name, node in sorted(d.children.items()):
                    path = f"{prefix}/{name}"
                    if isinstance(node, _Dir):
                        stack.append((path, node))
                    else:
                        out.append(path)
        return iter(out)

    # -- FileSystem ---------------------------------------------------------------

    def open(self, path: str, *, create: bool = False) -> MemoryFileHandle:
        with self.lock:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                if not create:
                    raise _oserror(errno.ENOENT, path)
                node = _File(self.now_ms())
                parent.children[name] = node
            if not isinstance(node, _File):
                raise _oserror(errno.EISDIR, path)
            self.open_handles += 1
            return MemoryFileHandle(self, path, node, self.generation)

    def read_file(self, path: str) -> bytes:
        with self.lock:
            return bytes(self._file(path).data)

    def write_file(self, path: str, data: Buffer) -> None:
        with self.lock:
            parent, name = self._parent(path)
            node = _File(self.now_ms())
            fault = self.take_fault("write", path)
            node.data[:] = bytes(data) if fault is None else bytes(data)[: fault.keep_bytes]
            parent.children[name] = node
            self.writes += 1
            if fault is not None:
                raise _oserror(fault.err, path)

    def fsync(self, path: str) -> None:
        with self.lock:
            node = self._file(path)
            if self.take_fault("sync", path) is not None:
                raise _oserror(errno.EIO, path)
            node.synced = bytes(node.data)
            self.syncs += 1

    def drop_cache(self, path: str, start: int, end: int, keep: bool = False) -> None:
        """Only remembered (``dropped``, or ``written_back`` with ``keep``): a model
        has no page cache."""
        with self.lock:
            self._file(path)
            (self.written_back if keep else self.dropped).append((path, start, end))

    def sync_dir(self, path: str) -> None:
        with self.lock:
            node = self._lookup(path)
            if not isinstance(node, _Dir):
                raise _oserror(errno.ENOTDIR, path)
            if self.take_fault("sync", path) is not None:
                raise _oserror(errno.EIO, path)
            node.durable = dict(node.children)
            self.syncs += 1

    def sync_all(self, path: str) -> None:
        """Every file and directory made durable (one file system here)."""
        with self.lock:
            self._lookup(path)
            if self.take_fault("sync", path) is not None:
                raise _oserror(errno.EIO, path)
            seen: set[int] = set()
            todo: list[_Dir] = [self._root]
            while todo:
                d = todo.pop()
                d.durable = dict(d.children)
                for node in d.children.values():
                    if id(node) in seen:
                        continue
                    seen.add(id(node))
                    if isinstance(node, _Dir):
                        todo.append(node)
                    else:
                        node.synced = bytes(node.data)
            self.syncs += 1

    def exists(self, path: str) -> bool:
        with self.lock:
            try:
                self._lookup(path)
            except FileNotFoundError:
                return False
            return True

    def is_dir(self, path: str) -> bool:
        with self.lock:
            try:
                return isinstance(self._lookup(path), _Dir)
            except FileNotFoundError:
                return False

    def listdir(self, path: str) -> list[str]:
        with self.lock:
            node = self._lookup(path)
            if not isinstance(node, _Dir):
                raise _oserror(errno.ENOTDIR, path)
            return list(node.children)

    def subdirs(self, path: str) -> list[str]:
        with self.lock:
            node = self._lookup(path)
            if not isinstance(node, _Dir):
                raise _oserror(errno.ENOTDIR, path)
            return [name for name, child in node.children.items() if isinstance(child, _Dir)]

    def makedirs(self, path: str) -> None:
        with self.lock:
            node: _Dir = self._root
            for part in _split(path):
                child = node.children.get(part)
                if child is None:
                    child = _Dir()
                    node.children[part] = child
                if not isinstance(child, _Dir):
                    raise _oserror(errno.ENOTDIR, path)
                node = child

    def remove(self, path: str) -> None:
        with self.lock:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                raise _oserror(errno.ENOENT, path)
            if isinstance(node, _Dir):
                raise _oserror(errno.EISDIR, path)
            del parent.children[name]

    def rmtree(self, path: str) -> None:
        with self.lock:
            parent, name = self._parent(path)
            if name not in parent.children:
                raise _oserror(errno.ENOENT, path)
            del parent.children[name]

    def rename(self, src: str, dst: str) -> None:
        with self.lock:
            src_parent, src_name = self._parent(src)
            dst_parent, dst_name = self._parent(dst)
            node = src_parent.children.get(src_name)
            if node is None:
                raise _oserror(errno.ENOENT, src)
            del src_parent.children[src_name]
            dst_parent.children[dst_name] = node

    def size(self, path: str) -> int:
        with self.lock:
            return len(self._file(path).data)

    def allocated(self, path: str) -> int:
        """The bytes of ``path`` that have disk blocks: its size, or more while an
        ``allocate`` past the end is in force (a test's view; not in the seam)."""
        with self.lock:
            node = self._file(path)
            return max(len(node.data), node.allocated)

    def mtime_ms(self, path: str) -> int:
        with self.lock:
            return self._file(path).mtime_ms

"""The file-system seam: the in-memory model's crash semantics and faults, the OS
implementation's positional writes, and the handle cache."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import pytest

from odradek.storage import MemoryFileSystem, OsFileSystem
from odradek.storage.fs import FileSystem, makedirs_durable
from odradek.storage.handles import HandleCache


def test_crash_drops_unsynced_data_and_names() -> None:
    fs = MemoryFileSystem()
    makedirs_durable(fs, "/a/b")
    h = fs.open("/a/b/f", create=True)
    h.pwrite(0, [b"hello"])
    fs.fsync("/a/b/f")
    h.pwrite(5, [b" world"])
    fs.write_file("/a/b/unsynced-name", b"x")
    fs.crash()
    assert fs.listdir("/a/b") == []  # the directory entry was never synced
    fs = MemoryFileSystem()
    makedirs_durable(fs, "/a")
    h = fs.open("/a/f", create=True)
    h.pwrite(0, [b"hello"])
    fs.fsync("/a/f")
    fs.sync_dir("/a")
    h.pwrite(5, [b" world"])
    fs.rename("/a/f", "/a/g")
    fs.crash()
    assert fs.listdir("/a") == ["f"] and fs.read_file("/a/f") == b"hello"
    with pytest.raises(OSError):
        h.pread(0, 1)  # handles do not survive a crash


def test_torn_crash_keeps_a_prefix_of_the_unsynced_tail() -> None:
    for seed in range(50):
        fs = MemoryFileSystem()
        makedirs_durable(fs, "/a")
        h = fs.open("/a/f", create=True)
        fs.sync_dir("/a")
        h.pwrite(0, [b"A" * 10])
        fs.fsync("/a/f")
        h.pwrite(10, [b"B" * 20])
        fs.crash(random.Random(seed))
        data = fs.read_file("/a/f")
        assert data.startswith(b"A" * 10) and data[10:] == b"B" * (len(data) - 10)


def test_injected_faults() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/a")
    h = fs.open("/a/x.log", create=True)
    fs.fail_next_write(".log", keep_bytes=3)
    with pytest.raises(OSError) as e:
        h.pwrite(0, [b"abcdef"])
    assert e.value.errno == errno.ENOSPC
    assert fs.read_file("/a/x.log") == b"abc"
    h.pwrite(3, [b"def"])  # one fault only
    fs.fail_next_sync("x.log")
    with pytest.raises(OSError):
        fs.fsync("/a/x.log")
    fs.crash()
    assert not fs.exists("/a")  # nothing was ever synced


@pytest.mark.parametrize("kind", ["os", "memory"])
def test_file_system_contract(tmp_path: Path, kind: str) -> None:
    fs: FileSystem = OsFileSystem() if kind == "os" else MemoryFileSystem()
    root = str(tmp_path) if kind == "os" else "/root"
    fs.makedirs(f"{root}/d")
    h = fs.open(f"{root}/d/f", create=True)
    h.pwrite(0, [b"ab", memoryview(b"cdef")[1:], bytearray(b"g")])
    assert h.pread(0, 100) == b"abdefg" and h.size() == 6
    h.truncate(2)
    assert fs.read_file(f"{root}/d/f") == b"ab" and fs.size(f"{root}/d/f") == 2
    h.close()
    fs.write_file(f"{root}/d/g", b"1")
    fs.rename(f"{root}/d/g", f"{root}/d/f")
    assert fs.read_file(f"{root}/d/f") == b"1"
    assert sorted(fs.listdir(f"{root}/d")) == ["f"]
    fs.fsync(f"{root}/d/f")
    fs.sync_dir(f"{root}/d")
    assert fs.is_dir(f"{root}/d") and not fs.is_dir(f"{root}/d/f")
    with pytest.raises(FileNotFoundError):
        fs.open(f"{root}/d/missing")
    fs.remove(f"{root}/d/f")
    fs.rmtree(f"{root}/d")
    assert not fs.exists(f"{root}/d")


def test_handle_cache_is_an_lru_with_a_cap() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/a")
    cache = HandleCache(fs, max_open=2)
    for name in "xyz":
        cache.get(f"/a/{name}", create=True)
    assert cache.open_count == 2 and fs.open_handles == 2 and cache.evictions == 1
    cache.get("/a/y")
    cache.get("/a/x")  # reopened; evicts z, the least recently used
    cache.get("/a/y")
    assert cache.opens == 4
    cache.close_all()
    assert fs.open_handles == 0

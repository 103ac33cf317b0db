"""Replacing many small files durably with two file-system syncs instead of two
syncs per file.

A checkpoint file is replaced atomically by writing ``<name>.tmp``, fsyncing
it, renaming it over ``<name>`` and syncing the directory
(:func:`~odradek.storage.checkpoint.write_atomically`): two waits for the disk
per file. When a broker is given the lead of tens of thousands of partitions at
once (a cluster's restart re-elects every partition at a new leader epoch),
that is tens of thousands of waits, even spread over threads.

:func:`replace_all` does the same steps for a whole batch, in the same order,
with one ``syncfs`` (:meth:`~odradek.storage.fs.FileSystem.sync_all`) where
each file had its own sync: every ``.tmp`` written, one sync (each new file's
bytes are durable), every rename, one sync (each new name is durable). A
crash at any point leaves each file either as it was or replaced whole, as
the one-file path does.

``syncfs`` also writes back every other dirty page of the file system, so the
batch path is taken only while the machine holds few dirty pages for the
batch's size (:func:`dirty_bytes` at most :data:`DIRTY_BASE` plus
:data:`DIRTY_PER_FILE` per file): the two syncs a file saves cost about a
millisecond on these disks, in which ~128 KiB more could be written back, so
past that bound the file-by-file path (on threads) is taken as before. A
broker restarting has little dirty data; one busy with producers may have
gigabytes. A failure returns False, and the
caller writes every file again the one-file way, which is always safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from odradek.storage.fs import FileSystem
from odradek.storage.names import TMP_SUFFIX

MIN_FILES = 64
"""Fewer files than this are not worth a file-system sync."""

DIRTY_BASE = 64 << 20
DIRTY_PER_FILE = 128 << 10
"""Dirty and under-write-back bytes (``/proc/meminfo``) allowed for a batch:
``DIRTY_BASE + DIRTY_PER_FILE * files``; above, a file-system sync could wait
longer for other data than the files' own syncs take, and the batch goes file
by file. (An idle machine here holds ~100 MB dirty: 10 % of memory may be
dirty before the kernel writes back, for up to 30 s.)"""


def dirty_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """``Dirty`` plus ``Writeback`` from ``/proc/meminfo``, in bytes; None if it
    cannot be read."""
    try:
        with open(meminfo, encoding="ascii") as f:
            total = 0
            for line in f:
                if line.startswith(("Dirty:", "Writeback:")):
                    total += int(line.split()[1]) * 1024
            return total
    except (OSError, ValueError, IndexError):
        return None


def worth_it(count: int, dirty: int | None) -> bool:
    """Whether a batch of ``count`` files goes through :func:`replace_all`."""
    return (count >= MIN_FILES and dirty is not None
            and dirty <= DIRTY_BASE + DIRTY_PER_FILE * count)


def replace_all(fs: FileSystem, files: Sequence[tuple[str, bytes]], roots: Iterable[str]) -> bool:
    """Replace each ``(path, data)`` atomically, all durable on return, syncing the
    file systems of ``roots`` (the log directories holding the files) twice.
    False if any step failed: some files may be replaced but not yet durable,
    and the caller must write them all again one by one."""
    roots = sorted(set(roots))
    try:
        for path, data in files:
            fs.write_file(path + TMP_SUFFIX, data)
        for root in roots:
            fs.sync_all(root)
        for path, _ in files:
            fs.rename(path + TMP_SUFFIX, path)
        for root in roots:
            fs.sync_all(root)
    except OSError:
        return False
    return True

"""The clean-shutdown summary of a log directory: what opening its partitions reads.

Opening a partition after a clean shutdown reads four things from its
directory: the listing, the size of each ``.log`` file, ``partition.metadata``
and ``leader-epoch-checkpoint``. At 100,000 partitions that is ~400,000 system
calls and about half of a restart's time. A clean shutdown writes three of
them into one file per log directory, and the next start reads that instead.
``partition.metadata`` is still read from each directory: it says whose
partition the directory is, and a directory of another topic (copied in while
the broker was down) must be moved aside, never served.

File ``log-dir-summary`` in the log directory, text::

    0                                   version
    <checkpoints>                       crc32c of the offset checkpoints, 8 hex digits
    <n>                                 partition lines that follow
    <dir> <epochs> <files>              one per partition directory
    ...
    <crc32c of every byte above, 8 hex digits>

- ``<dir>``: the partition directory's name (``<topic>-<partition>``);
- ``<epochs>``: the bytes of ``leader-epoch-checkpoint``, base64, or ``-``
  when the file is not there. They are parsed at start exactly as the file
  would be (an unreadable one is unreadable from here too);
- ``<files>``: the directory's file names joined by ``/``, each ``.log`` name
  followed by ``:`` and its size in bytes; ``-`` for none. A directory holding
  a name with ``/``, ``:`` or white space, or named ``-``, gets no line.

Invariants:

- **Written** by :func:`write_summary` at a clean shutdown, after every log of
  the directory is flushed and closed and its checkpoints are written, from
  what is on disk then (:func:`describe` lists and reads each directory), and
  before the clean-shutdown marker; replaced atomically (``.tmp``, fsync,
  rename, directory sync).
- **Bound to its shutdown**: ``<checkpoints>`` is the CRC32C of the
  directory's four offset checkpoint files as that shutdown wrote them. A
  start (by a version of Odradek that knows no summary) that appended, rolled,
  truncated, deleted or cleaned anything rewrote them at its own clean stop,
  so the summary it left behind no longer matches and is not used.
- **Read** at start only when the directory's clean-shutdown marker is there:
  the summary is trusted as the marker is, that nothing changed since the
  clean close (Kafka skips recovery on the marker's word). A directory the
  summary does not name, a summary whose CRC does not match, or an unknown
  version: the directories are listed and read as without one.
- **Removed** at start together with the marker, with the same directory
  sync, before anything is written: after a crash no summary can describe a
  directory that changed since.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from crc32c import crc32c

from odradek.storage.checkpoint import TopicPartition, write_atomically
from odradek.storage.fs import FileHandle, FileSystem
from odradek.storage.names import (
    CLEANER_OFFSET_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    parse_partition_dir_name,
)

_log = logging.getLogger("odradek.storage")

SUMMARY_FILE = "log-dir-summary"
VERSION = "0"
_NONE = "-"
_UNSAFE = frozenset("/: \t\n\r\x0b\x0c")


@dataclass(frozen=True, slots=True)
class KnownDir:
    """One partition directory as the summary has it."""

    names: tuple[str, ...]
    """Every file name in the directory."""
    log_sizes: dict[str, int]
    """The size of each ``.log`` file, by name."""
    epochs: bytes | None
    """The bytes of ``leader-epoch-checkpoint`` (None: no such file)."""


def summary_path(log_dir: str) -> str:
    return posixpath.join(log_dir, SUMMARY_FILE)


def _read_or_none(fs: FileSystem, path: str) -> bytes | None:
    try:
        return fs.read_file(path)
    except FileNotFoundError:
        return None


def _b64(data: bytes | None) -> str:
    return _NONE if data is None else base64.b64encode(data).decode()


def describe(fs: FileSystem, dir_path: str) -> str | None:
    """The summary line of the partition directory ``dir_path`` as it is on disk
    now (None: it cannot be written as one, see the module doc)."""
    names = fs.listdir(dir_path)
    files = []
    for name in names:
        if name == _NONE or not _UNSAFE.isdisjoint(name):
            return None
        if name.endswith(LOG_SUFFIX):
            files.append(f"{name}:{fs.size(posixpath.join(dir_path, name))}")
        else:
            files.append(name)
    epochs = _read_or_none(fs, posixpath.join(dir_path, LEADER_EPOCH_CHECKPOINT))
    return " ".join((posixpath.basename(dir_path), _b64(epochs),
                     "/".join(files) or _NONE))


def checkpoints_crc(fs: FileSystem, log_dir: str) -> int:
    """CRC32C of the directory's offset checkpoint files, in a fixed order
    (a missing one counts as empty), read a chunk at a time."""
    crc = 0
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                 HIGH_WATERMARK_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT):
        try:
            handle = fs.open(posixpath.join(log_dir, name))
        except FileNotFoundError:
            continue
        try:
            size = handle.size()
            for pos in range(0, size, CHUNK):
                crc = crc32c(handle.pread(pos, min(CHUNK, size - pos)), crc)
        finally:
            handle.close()
    return crc


def write_summary(fs: FileSystem, log_dir: str, lines: Iterable[str]) -> None:
    """Replace the directory's summary by ``lines`` (from :func:`describe`),
    bound to the checkpoint files as they are now."""
    kept = list(lines)
    body = (f"{VERSION}\n{checkpoints_crc(fs, log_dir):08x}\n{len(kept)}\n"
            + "".join(line + "\n" for line in kept))
    data = body.encode()
    write_atomically(fs, summary_path(log_dir), data + b"%08x\n" % crc32c(data))


def _parse(rest: str) -> KnownDir:
    epochs, files = rest.split(" ")
    names: list[str] = []
    sizes: dict[str, int] = {}
    for entry in files.split("/") if files != _NONE else ():
        file_name, sep, size = entry.partition(":")
        names.append(file_name)
        if sep:
            sizes[file_name] = int(size)
    return KnownDir(
        tuple(names), sizes,
        None if epochs == _NONE else base64.b64decode(epochs, validate=True))


CHUNK = 1 << 20
"""Bytes read at a time: the file is streamed, never held whole (a 15 MB read
at 100k partitions, freed amid the logs' objects, left the heap that much
larger)."""
_TRAILER = 9  # "%08x\n"


class SummaryReader:
    """A summary's lines, taken in the order the log manager opens its logs:
    by (topic, partition), the order :func:`write_summaries` writes them in.
    Each line is read and parsed when its directory is opened and dropped at
    once (100k entries parsed up front, then freed among the logs' long-lived
    objects, also left the heap larger). :meth:`close` when done."""

    __slots__ = ("_handle", "_lines", "_next", "path", "taken")

    def __init__(self, handle: FileHandle, start: int, end: int, path: str = "") -> None:
        self._handle = handle
        self.path = path
        self.taken = 0
        """Directories opened from it so far."""
        self._lines = _lines(handle, start, end)
        self._next: tuple[TopicPartition | None, bytes] | None = None

    def take(self, key: TopicPartition) -> KnownDir | None:
        """The entry of the partition directory of ``key`` (None: the summary
        has none, or one that does not parse). Keys must come in order; lines
        for keys passed over are skipped."""
        while True:
            if self._next is None:
                try:
                    line = next(self._lines, None)
                except OSError as exc:  # the rest is listed and read as without one
                    _log.warning("%s: cannot be read further: %s", self.path, exc)
                    self._lines = iter(())
                    return None
                if line is None:
                    return None
                name, _, rest = line.partition(b" ")
                self._next = (parse_partition_dir_name(name.decode(errors="replace")), rest)
            line_key, rest = self._next
            if line_key is None or line_key < key:
                self._next = None
                continue
            if line_key > key:
                return None
            self._next = None
            try:
                known = _parse(rest.decode())
            except (ValueError, binascii.Error):
                return None
            self.taken += 1
            return known

    def close(self) -> None:
        self._handle.close()
        _log.info("%s: %d partition directories opened from it", self.path, self.taken)


def _lines(handle: FileHandle, start: int, end: int) -> Iterator[bytes]:
    tail = b""
    for pos in range(start, end, CHUNK):
        *lines, tail = (tail + handle.pread(pos, min(CHUNK, end - pos))).split(b"\n")
        yield from lines


def read_summary(fs: FileSystem, log_dir: str) -> SummaryReader | None:
    """The directory's summary (None when there is none or it does not check
    out: then every directory is listed and read)."""
    path = summary_path(log_dir)
    try:
        handle = fs.open(path)
    except FileNotFoundError:
        return None
    try:
        size = handle.size()
        end = size - _TRAILER
        if end < 4:
            raise ValueError("too short")
        crc, newlines = 0, 0
        for pos in range(0, end, CHUNK):
            chunk = handle.pread(pos, min(CHUNK, end - pos))
            crc = crc32c(chunk, crc)
            newlines += chunk.count(b"\n")
        if handle.pread(end, _TRAILER) != b"%08x\n" % crc:
            raise ValueError("CRC does not match")
        version, bound, count, _ = handle.pread(0, min(64, end)).split(b"\n", 3)
        if version.decode() != VERSION:
            raise ValueError(f"unknown version {version!r}")
        if int(count) != newlines - 3:
            raise ValueError(f"{newlines - 3} lines, {int(count)} announced")
        if int(bound, 16) != checkpoints_crc(fs, log_dir):
            raise ValueError("written at another shutdown than the checkpoints")
        return SummaryReader(handle, len(version) + len(bound) + len(count) + 3, end, path)
    except (ValueError, UnicodeDecodeError) as exc:
        handle.close()
        _log.warning("%s: ignored (%s); the partition directories are listed", path, exc)
        return None
    except BaseException:
        handle.close()
        raise


def remove_summary(fs: FileSystem, log_dir: str) -> bool:
    """Remove the directory's summary; whether there was one (the caller syncs
    the directory)."""
    path = summary_path(log_dir)
    if not fs.exists(path):
        return False
    fs.remove(path)
    return True


def write_summaries(fs: FileSystem, log_dirs: Iterable[str], partition_dirs: Iterable[str]) -> None:
    """At a clean shutdown, every log closed: each log directory's summary of
    the ``partition_dirs`` in it. A directory whose summary cannot be written
    gets none (its partitions are listed at the next start)."""
    by_dir: dict[str, list[tuple[TopicPartition, str]]] = {d: [] for d in log_dirs}
    for path in partition_dirs:
        key = parse_partition_dir_name(posixpath.basename(path))
        if key is not None:
            by_dir.setdefault(posixpath.dirname(path), []).append((key, path))
    # One thread: 100k directories take ~2.2 s here; spread over 2 or 8
    # threads the same calls took 5.9 and 6.9 s (they hold the GIL between
    # the system calls and queue for it).
    for log_dir, paths in by_dir.items():
        try:
            lines = [line for _, path in sorted(paths)
                     if (line := describe(fs, path)) is not None]
            write_summary(fs, log_dir, lines)
        except OSError as exc:
            _log.warning("%s: no clean-shutdown summary written: %s", log_dir, exc)
            with contextlib.suppress(OSError):
                remove_summary(fs, log_dir)


def take_summary(fs: FileSystem, log_dir: str,
                 clean: bool) -> tuple[SummaryReader | None, bool]:
    """At start: the directory's summary if its clean-shutdown marker is there
    (``clean``), and whether a summary was removed (it is, either way; the
    caller removes the marker and syncs the directory)."""
    known = read_summary(fs, log_dir) if clean else None
    return known, remove_summary(fs, log_dir)

"""A partition's transaction files: ``.txnindex`` per segment and producer snapshots.

Both are Kafka's formats, so a data directory reads the same way to Kafka's
tools. The partition layer decides their contents; this module only stores
them (:class:`TxnFiles`, owned by :class:`~odradek.storage.log.Log`).

``<base>.txnindex`` (a segment companion): the aborted transactions whose
ABORT marker is in that segment, one 34-byte big-endian entry each::

    int16 version (0) | int64 producerId | int64 firstOffset
    | int64 lastOffset (the marker) | int64 lastStableOffset

Entries are appended in marker order (``lastOffset`` rising). A torn tail
(fewer than 34 bytes) or an entry of another version ends the file's reading.

``<offset, 20 digits>.snapshot``: the producer state for every batch below
``offset``: ``int16 version (1) | uint32 CRC-32C of what follows | int32
count`` then per producer ``int64 producerId | int16 epoch | int32
lastSequence | int64 lastOffset | int32 offsetDelta | int64 timestamp |
int32 coordinatorEpoch | int64 currentTxnFirstOffset`` (46 bytes). Written
when a segment rolls (at the new segment's base, not synced: a snapshot that
does not check out is ignored) and at close (synced, before the clean-shutdown
marker). Invariants: every snapshot's offset is at most the log end offset
(a truncation removes those above), and at most :data:`KEEP_SNAPSHOTS` are kept.
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from crc32c import crc32c

from odradek.storage.checkpoint import write_atomically
from odradek.storage.fs import FileSystem
from odradek.storage.names import TXN_INDEX_SUFFIX, segment_file_name, segment_path

_ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = _ENTRY.size  # 34
SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1
_SNAP_HEAD: Final = struct.Struct(">hI")
_COUNT: Final = struct.Struct(">i")
_PRODUCER: Final = struct.Struct(">qhiqiqiq")
KEEP_SNAPSHOTS: Final = 2


class AbortedEntry(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class SnapshotError(ValueError):
    """A producer snapshot that does not check out (it is then ignored)."""


def encode_entry(entry: AbortedEntry) -> bytes:
    return _ENTRY.pack(0, *entry)


def parse_entries(data: bytes) -> list[AbortedEntry]:
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != 0:
            break
        out.append(AbortedEntry(*fields))
    return out


def encode_snapshot(entries: Sequence[SnapshotEntry]) -> bytes:
    body = _COUNT.pack(len(entries)) + b"".join(_PRODUCER.pack(*e) for e in entries)
    return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def parse_snapshot(data: bytes) -> list[SnapshotEntry]:
    if len(data) < _SNAP_HEAD.size + _COUNT.size:
        raise SnapshotError("producer snapshot shorter than its header")
    version, crc = _SNAP_HEAD.unpack_from(data, 0)
    body = data[_SNAP_HEAD.size:]
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"producer snapshot version {version}")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _PRODUCER.size:
        raise SnapshotError(f"producer snapshot of {len(data)} bytes claims {count} entries")
    if crc32c(body) != crc:
        raise SnapshotError("producer snapshot CRC mismatch")
    return [SnapshotEntry(*_PRODUCER.unpack_from(body, _COUNT.size + i * _PRODUCER.size))
            for i in range(count)]


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class TxnFiles:
    """The ``.txnindex`` and ``.snapshot`` files of one partition directory."""

    __slots__ = ("dir_path", "fs", "listing")

    def __init__(self, fs: FileSystem, dir_path: str) -> None:
        self.fs = fs
        self.dir_path = dir_path
        self.listing: frozenset[str] | None = None
        """The names of the directory's ``.txnindex`` and ``.snapshot`` files as the
        log's opening listed them after a clean shutdown, so the partition's
        first look (:meth:`aborted`, :meth:`snapshot_offsets`) needs no listing
        or ``stat`` of its own; None when unknown. Whoever changes the
        directory's files forgets it first (this object's writers, and the log's
        removals, truncations and swaps: :meth:`forget_listing`)."""

    def forget_listing(self) -> None:
        """The directory's files are about to change: list them afresh from now on."""
        self.listing = None

    # -- .txnindex ----------------------------------------------------------------------

    def append_aborted(self, segment_base: int, entry: AbortedEntry) -> None:
        """Add ``entry`` to the ``.txnindex`` of the segment based at ``segment_base``
        (the one holding its marker). Not synced: the partition rebuilds missing
        entries from the markers on start-up."""
        self.listing = None
        handle = self.fs.open(segment_path(self.dir_path, segment_base, TXN_INDEX_SUFFIX),
                              create=True)
        try:
            size = handle.size()
            handle.pwrite(size - size % ENTRY_SIZE, [encode_entry(entry)])
        finally:
            handle.close()

    def aborted(self, segment_bases: Sequence[int]) -> list[AbortedEntry]:
        """Every entry of the segments' ``.txnindex`` files, in marker order."""
        out: list[AbortedEntry] = []
        listing = self.listing
        if listing is not None and not listing:
            return out  # (most logs: no transaction files at all)
        for base in segment_bases:
            name = segment_file_name(base, TXN_INDEX_SUFFIX)
            path = posixpath.join(self.dir_path, name)
            if self.fs.exists(path) if listing is None else name in listing:
                out.extend(parse_entries(self.fs.read_file(path)))
        return out

    def truncate_from_end(self, log_end: int, segment_bases: Sequence[int]) -> None:
        """Drop entries and snapshots at or above ``log_end`` (after a truncation or
        an unclean recovery)."""
        self.listing = None
        for base in segment_bases:
            path = segment_path(self.dir_path, base, TXN_INDEX_SUFFIX)
            if not self.fs.exists(path):
                continue
            entries = parse_entries(self.fs.read_file(path))
            kept = [e for e in entries if e.last_offset < log_end]
            if len(kept) != len(entries):
                write_atomically(self.fs, path, b"".join(encode_entry(e) for e in kept))
        for offset in self.snapshot_offsets():
            if offset > log_end:
                self.fs.remove(posixpath.join(self.dir_path, snapshot_name(offset)))

    # -- producer snapshots -------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        out = []
        listing = self.listing
        for name in self.fs.listdir(self.dir_path) if listing is None else listing:
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def write_snapshot(self, offset: int, data: bytes, *, durable: bool) -> None:
        """Store the producer state below ``offset``; keep the newest few."""
        self.listing = None
        path = posixpath.join(self.dir_path, snapshot_name(offset))
        if durable:
            write_atomically(self.fs, path, data)
        else:
            self.fs.write_file(path, data)
        for old in self.snapshot_offsets()[:-KEEP_SNAPSHOTS]:
            self.fs.remove(posixpath.join(self.dir_path, snapshot_name(old)))

    def latest_snapshot(self, max_offset: int) -> tuple[int, list[SnapshotEntry]] | None:
        """The newest snapshot at or below ``max_offset`` that checks out."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            try:
                data = self.fs.read_file(posixpath.join(self.dir_path, snapshot_name(offset)))
                return offset, parse_snapshot(data)
            except (OSError, SnapshotError):
                continue
        return None

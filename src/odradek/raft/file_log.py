"""The Raft log on disk: :class:`FileRaftLog`, with :class:`MemoryRaftLog`'s semantics.

The log lives in one directory (a node's ``__cluster_metadata-0``), reached only
through the :class:`~odradek.storage.fs.FileSystem` seam. Files::

    00000000000000000000.log                    the entries (see below)
    <end offset:020d>-<epoch:010d>.checkpoint   a snapshot (Kafka's snapshot file name)
    quorum-state                                not ours (quorum_state.py)

**The log file.** One file, always named ``00000000000000000000.log``: it is
only ever replaced whole (by rename), so its name never changes; the base offset
of its first batch says where it starts. It is a sequence of Kafka RecordBatch
v2 batches (:mod:`odradek.wire.batch`), back to back, one batch per
:class:`~odradek.raft.log.Entry`:

* ``baseOffset`` = ``entry.offset``; ``lastOffsetDelta`` = records - 1;
* ``partitionLeaderEpoch`` = ``entry.epoch``;
* attributes: no compression, CreateTime, the control bit (0x20) set for a
  control entry (LeaderChange) and clear otherwise;
* one record per entry record: offset delta k for the k-th, timestamp 0 (the
  entries carry none), value = the record's bytes, no headers; the key is
  null, except in a control entry, where it is Kafka's control key for
  LEADER_CHANGE (version 0, type 2) (``odradek.raft.codec``, also what Fetch
  carries);
* producer id/epoch/sequence -1; CRC-32C as always.


Invariants of the file: its batches are contiguous (each starts where the one
before ends) with epochs that never decrease; it may begin with entries below
the snapshot's end (left by a crash, or loaded at start-up), which are skipped.
What was fsynced is always a prefix of the current file: appends only extend
it, a truncation below the fsynced length is fsynced at once, and rewrites go
by rename. So a crash leaves a prefix of the log, possibly with a torn batch at
the end.

Reading never touches the disk: every entry is kept in memory with its file
position (the metadata log is small; snapshots bound it). Appends write but do
not fsync; :meth:`FileRaftLog.flush` fsyncs the file and moves
:attr:`~FileRaftLog.flushed_offset` to the end.

**Snapshot files.** ``<end_offset:020d>-<epoch:010d>.checkpoint``, big-endian::

    magic           4 bytes  b"ODS1"
    crc             uint32   CRC-32C of the payload
    length          uint64   bytes of payload
    payload         length bytes (opaque: the metadata image)

Written as ``<name>.part``, fsynced, renamed, directory synced. Taking a
snapshot writes it, then rewrites the log without the entries below its end
(``00000000000000000000.log.tmp``, fsynced, renamed over the log, directory
synced), then deletes every other snapshot. Installing one (a follower behind
the leader's log start) writes it, empties the log (truncate, fsync), then
deletes the others.

**Opening** (recovery). ``.part`` and ``.tmp`` leftovers are deleted. The
newest snapshot that checks out (magic, length, CRC) is loaded: damaged newer
ones are passed over (and kept, as evidence), older ones are deleted. The log
is scanned batch by batch and cut (truncated and fsynced) at the first batch
that is torn, fails its CRC, does not follow the one before or lowers the
epoch: after a crash such a tail was never flushed, so never acknowledged.
Then, against the snapshot ``(end, epoch)``:

* entries below ``end`` are skipped; the rest are kept when the log agrees with
  the snapshot: its entry ending at ``end`` has the snapshot's epoch, or its
  first entry starts at ``end`` (with an epoch no lower);
* a log that disagrees (a crash while installing a snapshot, before the log was
  emptied; or a crash while taking one over unflushed entries) is emptied;
* a log that starts after ``end`` (0 without a snapshot), or that stops short of
  the end of a damaged newer snapshot, has lost entries: :class:`RaftLogError`.

Everything loaded is fsynced and counts as flushed.

An :class:`OSError` from any method leaves the object in an unknown state: drop
it and open the directory again (as Kafka takes a log directory offline).
"""

from __future__ import annotations

import bisect
import posixpath
import re
import struct
from typing import Final

from crc32c import crc32c

from odradek.raft.codec import decode_entry, encode_entry
from odradek.raft.log import Entry, LogError, Snapshot
from odradek.storage.checkpoint import write_atomically
from odradek.storage.fs import FileHandle, FileSystem, makedirs_durable
from odradek.storage.names import LOG_SUFFIX, TMP_SUFFIX, segment_file_name
from odradek.wire.primitives import DecodeError

LOG_FILE: Final = segment_file_name(0, LOG_SUFFIX)
SNAPSHOT_SUFFIX: Final = ".checkpoint"
PART_SUFFIX: Final = ".part"
SNAPSHOT_MAGIC: Final = b"ODS1"
_SNAP_HEAD: Final = struct.Struct(">4sIQ")
_SNAPSHOT_RE: Final = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class RaftLogError(Exception):
    """The log directory has lost entries it must hold; the message is one line."""


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(payload: bytes) -> bytes:
    return _SNAP_HEAD.pack(SNAPSHOT_MAGIC, crc32c(payload), len(payload)) + payload


def decode_snapshot(data: bytes) -> bytes:
    """The payload of a snapshot file; ValueError saying what is wrong."""
    if len(data) < _SNAP_HEAD.size:
        raise ValueError(f"{len(data)} bytes, shorter than its header")
    magic, crc, length = _SNAP_HEAD.unpack_from(data, 0)
    if magic != SNAPSHOT_MAGIC:
        raise ValueError(f"bad magic {magic!r}")
    payload = data[_SNAP_HEAD.size :]
    if len(payload) != length:
        raise ValueError(f"payload of {len(payload)} bytes, header says {length}")
    if crc32c(payload) != crc:
        raise ValueError("CRC mismatch")
    return payload


class FileRaftLog:
    """A :class:`~odradek.raft.log.RaftLog` in a directory; opening it recovers it."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory
        self.log_path = posixpath.join(directory, LOG_FILE)
        self._entries: list[Entry] = []
        self._offsets: list[int] = []  # entry start offsets, for bisect
        self._positions: list[int] = []  # where each entry's batch starts in the file
        self._snapshot: Snapshot | None = None
        self._flushed = 0
        self._tail = 0  # file position after the last entry
        self._durable = 0  # length of the file's fsynced prefix
        self._handle: FileHandle = self._recover()

    # -- the RaftLog protocol -------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._snapshot.end_offset if self._snapshot else 0

    @property
    def end_offset(self) -> int:
        return self._entries[-1].end if self._entries else self.start_offset

    @property
    def flushed_offset(self) -> int:
        return max(self._flushed, self.start_offset)

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._snapshot.epoch if self._snapshot else 0

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def append(self, entries: list[Entry]) -> None:
        """Write ``entries`` (not synced). As MemoryRaftLog, the entries before an
        invalid one are appended before :class:`LogError` is raised."""
        accepted: list[Entry] = []
        error: LogError | None = None
        end, epoch = self.end_offset, self.last_epoch
        for entry in entries:
            if entry.offset != end or not entry.records:
                error = LogError(f"append at {entry.offset}, log ends at {end}")
                break
            if entry.epoch < epoch:
                error = LogError(f"epoch {entry.epoch} after {epoch}")
                break
            accepted.append(entry)
            end, epoch = entry.end, entry.epoch
        if accepted:
            batches = [encode_entry(entry) for entry in accepted]
            try:
                self._handle.pwrite(self._tail, batches)
            except OSError:
                self._handle.truncate(self._tail)
                raise
            pos = self._tail
            for entry, batch in zip(accepted, batches, strict=True):
                self._entries.append(entry)
                self._offsets.append(entry.offset)
                self._positions.append(pos)
                pos += len(batch)
            self._tail = pos
        if error is not None:
            raise error

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        i = bisect.bisect_left(self._offsets, offset)
        return self._entries[i : i + max_entries]

    def entry_at(self, offset: int) -> Entry | None:
        """The entry holding ``offset``, if the log (not its snapshot) has it."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i < 0 or self._entries[i].end <= offset:
            return None
        return self._entries[i]

    def truncate_to(self, offset: int) -> int:
        """Drop every entry that ends above ``offset``; returns the new end offset."""
        i = bisect.bisect_right(self._offsets, offset)
        while i and self._entries[i - 1].end > offset:
            i -= 1
        if i < len(self._entries):
            pos = self._positions[i]
            self._handle.truncate(pos)
            if pos < self._durable:
                # Keep the fsynced bytes a prefix of the file: a crash must not
                # bring back entries cut here under ones appended later.
                self.fs.fsync(self.log_path)
                self._durable = pos
            self._tail = pos
            del self._entries[i:], self._offsets[i:], self._positions[i:]
        self._flushed = min(self._flushed, self.end_offset)
        return self.end_offset

    def flush(self) -> None:
        if self._durable < self._tail:
            self.fs.fsync(self.log_path)
            self._durable = self._tail
        self._flushed = self.end_offset

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch ≤ ``epoch`` in the log, the offset where it ends): the log
        end for the last epoch; the snapshot's epoch and the start offset below the
        first entry; (-1, start offset) when no epoch that old is known."""
        end = self.end_offset
        for entry in reversed(self._entries):
            if entry.epoch <= epoch:
                return entry.epoch, end
            end = entry.offset
        snap = self._snapshot
        if snap is not None and snap.epoch <= epoch:
            return snap.epoch, self.start_offset
        return -1, self.start_offset

    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def take_snapshot(self, end_offset: int, payload: bytes) -> Snapshot:
        """Replace the entries below ``end_offset`` (an entry boundary) by a snapshot."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if end_offset == self.start_offset:
            raise LogError("nothing to snapshot")
        if (i < len(self._offsets) and self._offsets[i] != end_offset) or (
            i == len(self._offsets) and end_offset != self.end_offset
        ):
            raise LogError(f"snapshot at {end_offset} is not an entry boundary")
        snapshot = Snapshot(end_offset, self._entries[i - 1].epoch, payload)
        name = self._write_snapshot(snapshot)
        cut = self._positions[i] if i < len(self._positions) else self._tail
        rest = self._handle.pread(cut, self._tail - cut)
        self._handle.close()
        try:
            write_atomically(self.fs, self.log_path, rest)
        finally:
            self._handle = self.fs.open(self.log_path)
        self._tail = self._durable = len(rest)
        self._positions = [pos - cut for pos in self._positions[i:]]
        del self._entries[:i], self._offsets[:i]
        self._snapshot = snapshot
        self._delete_snapshots_but(name)
        return snapshot

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Start over from ``snapshot`` (a follower behind the leader's log start)."""
        if snapshot.end_offset < 0 or snapshot.epoch < 0:
            raise LogError(f"snapshot at {snapshot.end_offset} epoch {snapshot.epoch}")
        name = self._write_snapshot(snapshot)
        if self._handle.size():
            self._handle.truncate(0)
            self.fs.fsync(self.log_path)
        self._tail = self._durable = 0
        self._entries.clear()
        self._offsets.clear()
        self._positions.clear()
        self._snapshot = snapshot
        self._flushed = snapshot.end_offset
        self._delete_snapshots_but(name)

    def close(self) -> None:
        self._handle.close()

    # -- files ------------------------------------------------------------------------

    def _write_snapshot(self, snapshot: Snapshot) -> str:
        name = snapshot_file_name(snapshot.end_offset, snapshot.epoch)
        path = posixpath.join(self.directory, name)
        part = path + PART_SUFFIX
        self.fs.write_file(part, encode_snapshot(snapshot.payload))
        self.fs.fsync(part)
        self.fs.rename(part, path)
        self.fs.sync_dir(self.directory)
        return name

    def _delete_snapshots_but(self, keep: str) -> None:
        removed = False
        for name in self.fs.listdir(self.directory):
            if name != keep and _SNAPSHOT_RE.match(name):
                self.fs.remove(posixpath.join(self.directory, name))
                removed = True
        if removed:
            self.fs.sync_dir(self.directory)

    def _recover(self) -> FileHandle:
        fs, directory = self.fs, self.directory
        makedirs_durable(fs, directory)
        names = fs.listdir(directory)
        for name in names:
            if name.endswith(PART_SUFFIX) or name == LOG_FILE + TMP_SUFFIX:
                fs.remove(posixpath.join(directory, name))

        # The newest snapshot that checks out; the damaged ones newer than it.
        found = sorted((int(m[1]), int(m[2]), name) for name in names
                       if (m := _SNAPSHOT_RE.match(name)))
        damaged: list[tuple[str, int, str]] = []  # (path, end offset, what is wrong)
        snapshot: Snapshot | None = None
        for end, epoch, name in reversed(found):
            path = posixpath.join(directory, name)
            try:
                payload = decode_snapshot(fs.read_file(path))
            except ValueError as exc:
                damaged.append((path, end, str(exc)))
                continue
            snapshot = Snapshot(end, epoch, payload)
            break

        created = not fs.exists(self.log_path)
        handle = fs.open(self.log_path, create=True)
        try:
            data = handle.pread(0, handle.size())
            entries, positions, pos = _scan(data)
            if pos < len(data):
                handle.truncate(pos)  # a torn or damaged tail
            start = snapshot.end_offset if snapshot else 0
            i = bisect.bisect_left([entry.offset for entry in entries], start)
            if i == 0 and entries and entries[0].offset > start:
                raise self._lost(damaged, f"{self.log_path} starts at offset "
                                 f"{entries[0].offset} but no snapshot covers the offsets "
                                 f"below it")
            if i == 0:
                keep = not entries or snapshot is None or entries[0].epoch >= snapshot.epoch
            else:
                before = entries[i - 1]
                keep = (snapshot is not None and before.end == start
                        and before.epoch == snapshot.epoch)
            end_offset = (entries[-1].end if keep and entries else start)
            if damaged and end_offset < max(end for _, end, _ in damaged):
                raise self._lost(damaged, "")
            if keep:
                entries, positions = entries[i:], positions[i:]
            else:
                entries, positions, pos = [], [], 0
                handle.truncate(0)
            fs.fsync(self.log_path)
            if created:
                fs.sync_dir(directory)
        except BaseException:
            handle.close()
            raise

        if snapshot is not None:
            stale = [name for end, epoch, name in found if (end, epoch) < (start, snapshot.epoch)]
            for name in stale:
                fs.remove(posixpath.join(directory, name))
            if stale:
                fs.sync_dir(directory)
        self._snapshot = snapshot
        self._entries = entries
        self._offsets = [entry.offset for entry in entries]
        self._positions = positions
        self._tail = self._durable = pos
        self._flushed = self.end_offset
        return handle

    def _lost(self, damaged: list[tuple[str, int, str]], what: str) -> RaftLogError:
        aside = ("move this directory's .log and .checkpoint files aside (keep quorum-state) so "
                 "the node fetches the log from the leader, safe only while a majority of the "
                 "voters still holds it")
        if damaged:
            path, end, reason = damaged[0]
            return RaftLogError(f"{path} is damaged ({reason}) and the log no longer holds "
                                f"the entries below {end} it stands for: restore it, or {aside}")
        return RaftLogError(f"{what}: restore the snapshot file, or {aside}")


def _scan(data: bytes) -> tuple[list[Entry], list[int], int]:
    """The entries of a log file up to the first batch that is torn, damaged, not
    contiguous or of a lower epoch; their positions; where that batch starts."""
    entries: list[Entry] = []
    positions: list[int] = []
    pos = 0
    while pos < len(data):
        try:
            entry, size = decode_entry(data, pos)
        except DecodeError:
            break
        if entries and (entry.offset != entries[-1].end or entry.epoch < entries[-1].epoch):
            break
        entries.append(entry)
        positions.append(pos)
        pos += size
    return entries, positions, pos

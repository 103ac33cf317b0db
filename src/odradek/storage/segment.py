"""One segment of a partition log: a ``.log`` file and its two indexes.

``<base offset>.log`` is a plain concatenation of RecordBatch v2 batches
(byte layout in :mod:`odradek.wire.batch`), each exactly as the producer sent
it except for the fields the broker owns: ``baseOffset`` (bytes 0-7, outside
the CRC), ``partitionLeaderEpoch`` (bytes 12-15, outside the CRC) and, for
``LogAppendTime`` topics, ``attributes`` bit 3 and ``maxTimestamp`` (with the CRC
recomputed). There is no file header and no padding; the first batch's base
offset equals the segment's base offset and every batch starts at the offset
after the previous batch's last offset. The file never holds a partial batch
except after a crash, and recovery cuts that off. The indexes are described in
:mod:`odradek.storage.index`.

In memory a segment knows its byte ``size`` and, once computed, its
``next_offset``, newest timestamp and the offset of the batch holding it.
Inactive segments load their indexes only when a read needs them; their newest
timestamp comes from the last time-index entry. Every index entry a lookup
relies on is checked against the batch it points at, so a stale or damaged
index is rebuilt instead of serving the wrong bytes.

The newest batches appended in this process are also kept in memory (the
*tail*, :mod:`odradek.storage.tail`), so a fetch at the end of the log finds
its batch with a bisect and one header read. Batches are walked through
:mod:`odradek.storage.frames`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from odradek.storage.errors import CorruptIndexError
from odradek.storage.frames import HEADER_CHUNK, read_headers, read_valid_batches
from odradek.storage.fs import FileHandle, FileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.index import (
    NO_TIMESTAMP,
    TIME_ENTRY_SIZE,
    OffsetIndex,
    TimeIndex,
    parse_last_time_entry,
)
from odradek.storage.names import (
    COMPANION_SUFFIXES,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_path,
)
from odradek.storage.tail import BatchTail
from odradek.wire.batch import BATCH_HEADER_SIZE, BatchHeader
from odradek.wire.primitives import Buffer, DecodeError

MIN_ALLOCATE_AHEAD: Final = 1 << 20
"""The least a segment reserves past an append's end (:meth:`Segment.allocate_for`)."""

# What the segment records about each appended batch: (last offset, max timestamp, size).
BatchMeta = tuple[int, int, int]


class Segment:
    __slots__ = (
        "_max_ts",
        "_oi",
        "_rolling_ts",
        "_tail",
        "_ti",
        "_ti_checked",
        "allocated_end",
        "base_offset",
        "bytes_since_index",
        "created_ms",
        "deferred",
        "dir_path",
        "dirty",
        "fs",
        "handles",
        "index_interval_bytes",
        "max_index_bytes",
        "next_offset",
        "size",
    )

    def __init__(
        self,
        fs: FileSystem,
        handles: HandleCache,
        dir_path: str,
        base_offset: int,
        *,
        max_index_bytes: int,
        index_interval_bytes: int,
        size: int,
        created_ms: int,
    ) -> None:
        self.fs = fs
        self.handles = handles
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.max_index_bytes = max_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.size = size
        self.allocated_end = size
        """Blocks past ``size`` were reserved by this object only below this
        (:meth:`allocate_for`); a truncation may have freed them already."""
        self.created_ms = created_ms
        self.next_offset = base_offset
        self.bytes_since_index = 0
        self.dirty = False  # files changed since the last flush took them
        self.deferred = False
        """An active segment opened after a clean shutdown without reading it:
        ``next_offset`` is the checkpointed log end, not yet checked against the
        files, and the indexes are unread. The local log loads it
        (:func:`odradek.storage.recovery.open_active_clean`) before its first
        append or truncation; reads load the indexes as for an inactive segment."""
        self._oi: OffsetIndex | None = None
        self._ti: TimeIndex | None = None
        self._ti_checked = False
        self._max_ts: tuple[int, int] | None = None
        self._rolling_ts: int | None = None
        self._tail: BatchTail | None = None  # made by the first append

    # -- life cycle ---------------------------------------------------------------

    @classmethod
    def create(
        cls,
        fs: FileSystem,
        handles: HandleCache,
        dir_path: str,
        base_offset: int,
        *,
        max_index_bytes: int,
        index_interval_bytes: int,
        now_ms: int,
    ) -> Segment:
        seg = cls(
            fs,
            handles,
            dir_path,
            base_offset,
            max_index_bytes=max_index_bytes,
            index_interval_bytes=index_interval_bytes,
            size=0,
            created_ms=now_ms,
        )
        if fs.exists(seg.log_path) and fs.size(seg.log_path) > 0:
            raise FileExistsError(f"segment {seg.log_path} already exists")
        handles.get(seg.log_path, create=True).truncate(0)
        fs.write_file(seg.index_path, b"")
        fs.write_file(seg.time_index_path, b"")
        seg.install_indexes(
            OffsetIndex(base_offset, max_index_bytes),
            TimeIndex(base_offset, max_index_bytes),
            bytes_since_index=0,
            max_ts=(NO_TIMESTAMP, base_offset),
            next_offset=base_offset,
        )
        return seg

    def install_indexes(
        self,
        oi: OffsetIndex,
        ti: TimeIndex,
        *,
        bytes_since_index: int,
        max_ts: tuple[int, int],
        next_offset: int,
    ) -> None:
        """Adopt indexes and counters computed by a scan (creation, open, recovery)."""
        self.deferred = False
        self._oi, self._ti = oi, ti
        self._ti_checked = True
        self.bytes_since_index = bytes_since_index
        self._max_ts = max_ts
        self.next_offset = next_offset

    def defer_empty(self) -> None:
        """Forget the indexes of this empty segment (just created, its index files
        empty) and mark it :attr:`deferred`: they are read again, empty, before
        its first append."""
        assert self.size == 0 and self.next_offset == self.base_offset
        self._oi = self._ti = None
        self._max_ts = None
        self.deferred = True

    def log_handle(self) -> FileHandle:
        return self.handles.get(self.log_path)

    def write_indexes(self) -> None:
        """Write index entries added since the last write (no fsync)."""
        for index, path in ((self._oi, self.index_path), (self._ti, self.time_index_path)):
            if index is None:
                continue
            position, cut, data = index.pending_write()
            if not cut and not data:
                continue
            handle = self.handles.get(path, create=True)
            if cut:
                handle.truncate(position)
            if data:
                handle.pwrite(position, [data])
            index.mark_written()
            self.dirty = True

    def become_inactive(self) -> None:
        """Record the segment's newest timestamp as a final time-index entry and write
        the indexes out, as Kafka does on roll and close; give back the blocks
        reserved past the end (:meth:`allocate_for`). No write may be pending."""
        if self._ti is not None:
            # (An unloaded time index already ends with this entry: that is where
            # the newest timestamp was read from.)
            ts, offset = self.max_timestamp()
            self._ti.maybe_append(ts, offset, force=True)
        self.write_indexes()
        if self.allocated_end > self.size:
            # The same size: the file keeps every byte, the file system frees the
            # reserved blocks past it.
            self.log_handle().truncate(self.size)
            self.allocated_end = self.size

    def allocate_for(self, end: int, ahead: int, limit: int) -> None:
        """Reserve disk blocks so that bytes up to ``end`` of the ``.log`` (an append
        about to be written) and some beyond are allocated before the writes
        reach them (:meth:`FileHandle.allocate`: the size is unchanged; on ext4
        a write into reserved blocks skips delayed-allocation accounting, about
        a fifth of the kernel's CPU per byte written here; docs/decisions.md).

        A reservation reaches ``end`` plus as much as the segment already holds,
        at least :data:`MIN_ALLOCATE_AHEAD` and at most ``ahead``, never past
        ``limit`` (``segment.bytes``) unless ``end`` is: a slow partition
        reserves little, a busy one ``ahead`` at a time. What is reserved past
        the size is given back when the segment becomes inactive (roll, close);
        a crash can leave one reservation per partition until its segment rolls."""
        if end <= self.allocated_end or ahead <= 0:
            return
        target = max(end, min(limit, end + min(ahead, max(MIN_ALLOCATE_AHEAD, end))))
        self.log_handle().allocate(self.allocated_end, target - self.allocated_end)
        self.allocated_end = target

    def relocate(self, dir_path: str, handles: HandleCache) -> None:
        """The partition directory was renamed ``dir_path``: the same files, new paths."""
        self.dir_path, self.handles = dir_path, handles

    @property
    def log_path(self) -> str:
        """``<dir>/<base offset, 20 digits>.log``, made when asked (not kept: a
        path string costs ~100 bytes per segment)."""
        return segment_path(self.dir_path, self.base_offset, LOG_SUFFIX)

    @property
    def index_path(self) -> str:
        """The ``.index`` file's path (made when asked, as :attr:`log_path`)."""
        return segment_path(self.dir_path, self.base_offset, INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        return segment_path(self.dir_path, self.base_offset, TIME_INDEX_SUFFIX)

    def close(self) -> None:
        self.become_inactive()
        for path in self.paths:
            self.handles.discard(path)

    def rename_deleted(self) -> list[str]:
        """Close the files (the ``.log`` and its companions that exist) and rename
        them ``*.deleted``; return the new paths."""
        out = []
        for path in self.paths:
            self.handles.discard(path)
            if self.fs.exists(path):
                self.fs.rename(path, path + DELETED_SUFFIX)
                out.append(path + DELETED_SUFFIX)
        return out

    @property
    def companions(self) -> tuple[str, ...]:
        """Paths of the files that belong to this segment besides its ``.log``
        (:data:`~odradek.storage.names.COMPANION_SUFFIXES`; not all need exist)."""
        return tuple(segment_path(self.dir_path, self.base_offset, s) for s in COMPANION_SUFFIXES)

    @property
    def paths(self) -> tuple[str, ...]:
        """The segment's files that exist: its ``.log``, both indexes, and any other
        companion present on disk."""
        extra = tuple(p for p in self.companions[2:] if self.fs.exists(p))
        return (self.log_path, self.index_path, self.time_index_path, *extra)

    # -- indexes ------------------------------------------------------------------

    def offset_index(self) -> OffsetIndex:
        if self._oi is None:
            self._load_indexes()
        assert self._oi is not None
        return self._oi

    def time_index(self) -> TimeIndex:
        if self._ti is None:
            self._load_indexes()
        assert self._ti is not None
        return self._ti

    def _load_indexes(self) -> None:
        oi = OffsetIndex(self.base_offset, self.max_index_bytes)
        ti = TimeIndex(self.base_offset, self.max_index_bytes)
        try:
            oi.load(self.fs.read_file(self.index_path), self.size)
            ti.load(self.fs.read_file(self.time_index_path))
        except (FileNotFoundError, CorruptIndexError):
            self.rebuild_indexes()
            return
        self._oi, self._ti = oi, ti
        self._ti_checked = False

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the log's batch headers (framing only: this runs
        on data that recovery already accepted) and rewrite the files."""
        oi = OffsetIndex(self.base_offset, self.max_index_bytes)
        ti = TimeIndex(self.base_offset, self.max_index_bytes)
        oi.state.reset_file()
        ti.state.reset_file()
        max_ts, max_off = NO_TIMESTAMP, self.base_offset
        since = 0
        next_offset = self.base_offset
        for pos, h in self.iter_headers(0):
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if since > self.index_interval_bytes:
                oi.append(h.last_offset, pos)
                ti.maybe_append(max_ts, max_off)
                since = 0
            since += h.size
            next_offset = h.next_offset
        ti.maybe_append(max_ts, max_off, force=True)
        self.install_indexes(
            oi, ti, bytes_since_index=since, max_ts=(max_ts, max_off), next_offset=next_offset
        )
        self.write_indexes()

    def max_timestamp(self) -> tuple[int, int]:
        """(newest batch max timestamp in the segment, last offset of the first batch
        holding it); (-1, base offset) when the segment has no timestamps."""
        if self._max_ts is None:
            self._max_ts = self._read_max_timestamp()
        return self._max_ts

    def _read_max_timestamp(self) -> tuple[int, int]:
        if self._ti is None:
            try:
                length = self.fs.size(self.time_index_path)
                handle = self.handles.get(self.time_index_path)
                tail = handle.pread(max(length - TIME_ENTRY_SIZE, 0), TIME_ENTRY_SIZE)
            except FileNotFoundError:
                tail = b""
                length = -1
            last = parse_last_time_entry(tail, self.base_offset)
            if length % TIME_ENTRY_SIZE == 0 and (last is None or self.entry_holds(last)):
                return last if last is not None else (NO_TIMESTAMP, self.base_offset)
            self.rebuild_indexes()
            assert self._max_ts is not None
            return self._max_ts
        self._check_time_index()
        return self.time_index().last() or (NO_TIMESTAMP, self.base_offset)

    def entry_holds(self, entry: tuple[int, int]) -> bool:
        """Does the batch ending at ``entry``'s offset have ``entry``'s timestamp?"""
        ts, offset = entry
        if self.size == 0:
            return False
        try:
            found = self.find_batch(offset)
        except (DecodeError, CorruptIndexError):
            return False
        return (
            found is not None and found[1].last_offset == offset and (found[1].max_timestamp == ts)
        )

    def _check_time_index(self) -> None:
        """Check the loaded time index's last entry against the log once; rebuild if wrong."""
        if self._ti_checked:
            return
        self._ti_checked = True
        last = self.time_index().last()
        if last is not None and not self.entry_holds(last):
            self.rebuild_indexes()

    def forget_rolling_timestamp(self) -> None:
        self._rolling_ts = None

    def rolling_timestamp(self) -> int:
        """The first batch's max timestamp (Kafka's base for ``segment.ms``), or -1."""
        if self._rolling_ts is None:
            self._rolling_ts = NO_TIMESTAMP
            if self.size > 0:
                for _, h in self.iter_headers(0, chunk=BATCH_HEADER_SIZE):
                    self._rolling_ts = h.max_timestamp
                    break
        return self._rolling_ts

    # -- append -------------------------------------------------------------------

    def append(self, chunks: Sequence[Buffer], batches: Sequence[BatchMeta]) -> None:
        """Write the batches' bytes at the end of the file and index them.
        On an IO error nothing in memory changes (the caller repairs the file)."""
        position = self.size
        self.handles.get(self.log_path).pwrite(position, chunks)
        self.note_appended(position, batches)

    def note_rolling_timestamp(self, batches: Sequence[BatchMeta]) -> None:
        """The first batches of this segment are assigned (their write may still be
        pending): their timestamp is the base for ``segment.ms``."""
        if batches:
            self._rolling_ts = batches[0][1]

    def note_appended(self, position: int, batches: Sequence[BatchMeta]) -> None:
        """The batches are now in the file at ``position`` (the segment's end):
        index them and grow. Called in file order, on the loop."""
        oi = self._oi if self._oi is not None else self.offset_index()
        ti = self._ti if self._ti is not None else self.time_index()
        max_ts, max_off = self._max_ts if self._max_ts is not None else self.max_timestamp()
        self.dirty = True
        if position == 0 and batches:
            self._rolling_ts = batches[0][1]
        interval = self.index_interval_bytes
        since = self.bytes_since_index
        tail = self._tail
        if tail is None:
            tail = self._tail = BatchTail()
        lasts, starts = tail.extend_at(position, self.next_offset)
        for last_offset, batch_ts, size in batches:
            lasts.append(last_offset)
            starts.append(position)
            if batch_ts > max_ts:
                max_ts, max_off = batch_ts, last_offset
            if since > interval:
                if oi.append(last_offset, position):
                    ti.maybe_append(max_ts, max_off)
                since = 0
            since += size
            position += size
        self.bytes_since_index = since
        self._max_ts = (max_ts, max_off)
        self.size = tail.end = position
        self.next_offset = batches[-1][0] + 1

    # -- reading ------------------------------------------------------------------

    def iter_headers(
        self, start: int, end: int | None = None, *, chunk: int = HEADER_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch in [start, end), checking framing only
        (:mod:`odradek.storage.frames`). Raises DecodeError/CorruptBatchError at a
        frame that cannot be a batch."""
        yield from read_headers(self.log_handle(), self.log_path, start,
                                self.size if end is None else end, chunk)

    def iter_valid_batches(
        self, start: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Like :meth:`iter_headers` but checks each whole batch (magic, CRC)."""
        yield from read_valid_batches(self.log_handle(), self.log_path, start,
                                      self.size if end is None else end)

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``."""
        tail = self._tail
        if tail is not None and tail.answers(offset, self.size):
            position = tail.position_of(offset)
            if position is None:
                return None
            return next(self.iter_headers(position, chunk=BATCH_HEADER_SIZE))
        for attempt in range(2):
            entry = self.offset_index().lookup(offset)
            start = 0 if entry is None else entry[1]
            first = True
            try:
                for pos, h in self.iter_headers(start):
                    if first and entry is not None and h.last_offset != entry[0]:
                        raise CorruptIndexError(f"{self.index_path}: entry {entry} is stale")
                    first = False
                    if h.last_offset >= offset:
                        return pos, h
                return None
            except (CorruptIndexError, DecodeError):
                if attempt or entry is None:
                    raise
                self.rebuild_indexes()
        return None

    def boundary_at_or_before(self, start: int, limit: int) -> tuple[int, int]:
        """(b, size of the batch at ``start``): b is the largest batch boundary with
        start <= b <= limit. Uses the index to skip, then scans headers."""
        oi = self.offset_index()
        entry = oi.floor_position(limit)
        scan_from = start if entry is None or entry[1] <= start else entry[1]
        first_size = -1
        pos = scan_from
        if scan_from != start:
            # The batch at ``start`` is needed for its size anyway.
            first_size = next(self.iter_headers(start, chunk=BATCH_HEADER_SIZE))[1].size
        for p, h in self.iter_headers(scan_from, chunk=BATCH_HEADER_SIZE):
            if p == scan_from and entry is not None and p != start and h.last_offset != entry[0]:
                self.rebuild_indexes()
                return self.boundary_at_or_before(start, limit)
            if first_size < 0:
                first_size = h.size
            if p + h.size > limit:
                break
            pos = p + h.size
        return pos, first_size

    def read(self, position: int, length: int) -> bytes:
        return self.log_handle().pread(position, length)

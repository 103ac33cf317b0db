"""The two sparse indexes of a segment, in Kafka's on-disk formats.

Offset index, ``<base offset>.index``
    A sequence of 8-byte entries, big-endian, no header::

        offset  size  field
             0     4  relativeOffset  int32  last offset of a batch minus the segment's base offset
             4     4  position        int32  byte position of that batch in the ``.log`` file

    One entry is added before a batch is appended when more than
    ``index.interval.bytes`` of log have been written since the previous entry
    (so the first batch of a segment never has one). Entries are strictly
    increasing in both fields. A lookup for offset ``t`` takes the last entry
    whose offset is ``<= t`` (the floor) and scans batch headers forward from
    its position; with no such entry the scan starts at position 0. Because an
    entry names the batch's *last* offset, the batch at the floor position
    either contains ``t`` or ends before it. Kafka's ``DumpLogSegments`` checks
    exactly this: the batch at ``position`` has ``lastOffset == base + relativeOffset``.

Time index, ``<base offset>.timeindex``
    A sequence of 12-byte entries, big-endian, no header::

        offset  size  field
             0     8  timestamp       int64  largest batch max timestamp so far in the segment
             8     4  relativeOffset  int32  last offset of the batch holding it, minus base

    An entry is considered at each offset-index entry and appended only when
    its timestamp is greater than the previous entry's, so timestamps are
    strictly increasing and offsets non-decreasing. When a segment stops being
    active (roll, close, recovery) one final entry records the segment's
    largest timestamp, so a later open learns a segment's newest timestamp from
    the last 12 bytes of the file without reading the log. The index counts as
    full one entry early, leaving room for that final entry.

Both files hold exactly ``entries * entry size`` bytes (no preallocation). After
a crash an index may be short, stale or torn: any file whose length is not a
multiple of the entry size, whose entries are not increasing, or whose entries
point past the log, fails :meth:`OffsetIndex.load` / :meth:`TimeIndex.load` and
is rebuilt from the log. In memory each index is two ``array`` columns; only the
entries appended since the last write are written out (at flush, roll and
close), so the append path does no index IO.
"""

from __future__ import annotations

import itertools
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from typing import Final

from odradek.storage.errors import CorruptIndexError

OFFSET_ENTRY_SIZE: Final = 8
TIME_ENTRY_SIZE: Final = 12
_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_LITTLE: Final = sys.byteorder == "little"
NO_TIMESTAMP: Final = -1


def _strictly_increasing(a: array[int]) -> bool:
    return all(x < y for x, y in itertools.pairwise(a))


def _non_decreasing(a: array[int]) -> bool:
    return all(x <= y for x, y in itertools.pairwise(a))


class _Persisted:
    """Which prefix of the in-memory entries the file already holds."""

    __slots__ = ("file_entries", "persisted")

    def __init__(self) -> None:
        self.persisted = 0  # leading entries equal in memory and in the file
        self.file_entries = 0  # entries the file holds (more than persisted after a truncation)

    def truncated(self, entries: int) -> None:
        self.persisted = min(self.persisted, entries)

    def reset_file(self) -> None:
        """The file is to be rewritten from scratch (e.g. it was found corrupt)."""
        self.persisted = 0
        self.file_entries = -1

    def plan(self) -> tuple[int, bool]:
        """(first entry to write, whether the file must be cut there first)."""
        return self.persisted, self.file_entries != self.persisted

    def written(self, entries: int) -> None:
        self.persisted = self.file_entries = entries


class OffsetIndex:
    """Offset -> position, see the module docstring for the file format."""

    __slots__ = ("_pos", "_rel", "base_offset", "max_entries", "state")

    def __init__(self, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes // OFFSET_ENTRY_SIZE, 1)
        self._rel: array[int] = array("i")
        self._pos: array[int] = array("i")
        self.state = _Persisted()

    def __len__(self) -> int:
        return len(self._rel)

    @property
    def is_full(self) -> bool:
        return len(self._rel) >= self.max_entries

    def load(self, data: bytes, log_size: int) -> None:
        """Replace the entries with the file's; raise CorruptIndexError if it fails a check."""
        if len(data) % OFFSET_ENTRY_SIZE:
            raise CorruptIndexError(f"offset index of {len(data)} bytes, not a multiple of 8")
        both: array[int] = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        rel, pos = both[0::2], both[1::2]
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= log_size):
            raise CorruptIndexError("offset index entry out of the segment's range")
        if not (_strictly_increasing(rel) and _strictly_increasing(pos)):
            raise CorruptIndexError("offset index entries not increasing")
        self._rel, self._pos = rel, pos
        self.state.written(len(rel))

    def append(self, offset: int, position: int) -> bool:
        """Add an entry; False (and nothing added) when the index is full."""
        if len(self._rel) >= self.max_entries:
            return False
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._rel.append(rel)
        self._pos.append(position)
        return True

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """The last entry with offset <= ``offset``, as (absolute offset, position)."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return None
        return self.base_offset + self._rel[i], self._pos[i]

    def floor_position(self, position: int) -> tuple[int, int] | None:
        """The last entry with position <= ``position``."""
        i = bisect_right(self._pos, position) - 1
        if i < 0:
            return None
        return self.base_offset + self._rel[i], self._pos[i]

    def last(self) -> tuple[int, int] | None:
        if not self._rel:
            return None
        return self.base_offset + self._rel[-1], self._pos[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        self.truncate_entries(bisect_left(self._rel, offset - self.base_offset))

    def truncate_entries(self, keep: int) -> None:
        if keep < len(self._rel):
            del self._rel[keep:]
            del self._pos[keep:]
            self.state.truncated(keep)

    def reset(self) -> None:
        self.truncate_entries(0)

    def pending_write(self) -> tuple[int, bool, bytes]:
        """(file position, cut the file there first?, bytes to write there)."""
        first, cut = self.state.plan()
        out = bytearray()
        for i in range(first, len(self._rel)):
            out += _OFFSET_ENTRY.pack(self._rel[i], self._pos[i])
        return first * OFFSET_ENTRY_SIZE, cut, bytes(out)

    def mark_written(self) -> None:
        self.state.written(len(self._rel))

    def to_bytes(self) -> bytes:
        both: array[int] = array("i", [0]) * (2 * len(self._rel))
        both[0::2], both[1::2] = self._rel, self._pos
        if _LITTLE:
            both.byteswap()
        return both.tobytes()


class TimeIndex:
    """Timestamp -> offset, see the module docstring for the file format."""

    __slots__ = ("_rel", "_ts", "base_offset", "max_entries", "state")

    def __init__(self, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(max_index_bytes // TIME_ENTRY_SIZE, 2)
        self._ts: array[int] = array("q")
        self._rel: array[int] = array("i")
        self.state = _Persisted()

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def is_full(self) -> bool:
        # One slot stays free for the final entry written when the segment goes inactive.
        return len(self._ts) >= self.max_entries - 1

    def load(self, data: bytes) -> None:
        if len(data) % TIME_ENTRY_SIZE:
            raise CorruptIndexError(f"time index of {len(data)} bytes, not a multiple of 12")
        pairs = list(_TIME_ENTRY.iter_unpack(data))
        n = len(pairs)
        ts: array[int] = array("q", [t for t, _ in pairs])
        rel: array[int] = array("i", [r for _, r in pairs])
        if rel and rel[0] < 0:
            raise CorruptIndexError("time index offset below the segment's base")
        if not (_strictly_increasing(ts) and _non_decreasing(rel)):
            raise CorruptIndexError("time index entries not increasing")
        self._ts, self._rel = ts, rel
        self.state.written(n)

    def maybe_append(self, timestamp: int, offset: int, *, force: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is newer than the last entry's
        (and the index has room, unless ``force``: the final entry of a segment)."""
        last_ts = self._ts[-1] if self._ts else NO_TIMESTAMP
        if timestamp <= last_ts:
            return
        if len(self._ts) >= self.max_entries or (not force and self.is_full):
            return
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise ValueError(f"time index offset {offset} goes back")
        self._ts.append(timestamp)
        self._rel.append(rel)

    def lookup_before(self, timestamp: int) -> tuple[int, int] | None:
        """The last entry with a timestamp strictly below ``timestamp``: every
        batch up to and including that entry's offset is older than ``timestamp``."""
        i = bisect_left(self._ts, timestamp) - 1
        if i < 0:
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def last_at_or_before_offset(self, offset: int) -> tuple[int, int] | None:
        """The last entry whose offset is <= ``offset``."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def last(self) -> tuple[int, int] | None:
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        keep = bisect_left(self._rel, offset - self.base_offset)
        if keep < len(self._ts):
            del self._ts[keep:]
            del self._rel[keep:]
            self.state.truncated(keep)

    def reset(self) -> None:
        self.truncate_to_offset(self.base_offset)

    def pending_write(self) -> tuple[int, bool, bytes]:
        """(file position, cut the file there first?, bytes to write there)."""
        first, cut = self.state.plan()
        out = bytearray()
        for i in range(first, len(self._ts)):
            out += _TIME_ENTRY.pack(self._ts[i], self._rel[i])
        return first * TIME_ENTRY_SIZE, cut, bytes(out)

    def mark_written(self) -> None:
        self.state.written(len(self._ts))


def parse_last_time_entry(data: bytes, base_offset: int) -> tuple[int, int] | None:
    """(timestamp, absolute offset) of the 12 bytes at the end of a time index file."""
    if len(data) < TIME_ENTRY_SIZE:
        return None
    ts, rel = _TIME_ENTRY.unpack_from(data, len(data) - TIME_ENTRY_SIZE)
    return int(ts), base_offset + int(rel)

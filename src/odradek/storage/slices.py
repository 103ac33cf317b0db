"""A byte range of a segment file: what a read of the log returns.

Storage and the network shell share this one type: reads return slices
covering whole batches, and the shell writes them with ``sendfile``
(:mod:`odradek.broker.net.transfer`), or copies them where it must.
:func:`slice_of` is the part of a read that falls in one segment,
:func:`read_slices` a read over a log's segments.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.storage.fs import FileHandle
from odradek.storage.handles import HandleCache
from odradek.storage.segment import Segment
from odradek.wire.primitives import DecodeError


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes at ``position`` of the segment file ``path`` (open as
    ``file``): whole batches, the first of which starts at ``first_offset``."""

    path: str
    position: int
    length: int
    first_offset: int
    file: FileHandle

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        data = self.file.pread(self.position, self.length)
        if len(data) != self.length:
            raise OSError(f"short read: {len(data)} of {self.length} bytes")
        return data

    def rest(self, skip: int) -> FileSlice:
        """The slice without its first ``skip`` bytes (what a partial send left)."""
        return FileSlice(self.path, self.position + skip, self.length - skip,
                         self.first_offset, self.file)


def slice_of(seg: Segment, handles: HandleCache, offset: int, limit: int, budget: int,
             min_one: bool) -> tuple[FileSlice | None, bool]:
    """The whole batches of ``seg`` from the one holding ``offset`` on, none at or past
    ``limit``, at most ``budget`` bytes (the first whole past it if ``min_one``),
    and whether a read goes on to the next segment."""
    found = seg.find_batch(offset)
    if found is None:
        return None, True  # nothing at or after ``offset`` here: try the next one
    start, header = found
    if header.last_offset >= limit:
        return None, False
    end = seg.size
    if limit < seg.next_offset:
        stop = seg.find_batch(limit)
        end = stop[0] if stop is not None else seg.size
    file = handles.get(seg.log_path)
    if end - start <= budget:
        return (FileSlice(seg.log_path, start, end - start, header.base_offset, file),
                end == seg.size)
    cut, first_size = seg.boundary_at_or_before(start, start + max(budget, 0))
    if cut == start and min_one:
        cut = start + first_size
    if cut == start:
        return None, False
    return FileSlice(seg.log_path, start, cut - start, header.base_offset, file), False


def read_slices(segments: Sequence[Segment], bases: Sequence[int], handles: HandleCache,
                offset: int, limit: int, max_bytes: int, min_one_batch: bool,
                damaged: Callable[[str, int, DecodeError], Exception]) -> list[FileSlice]:
    """Byte ranges holding whole batches of ``segments`` (based at ``bases``) from
    the one containing ``offset`` on, none with an offset at or past ``limit``,
    at most ``max_bytes`` except that the first batch is whole when
    ``min_one_batch`` (KIP-74). Bytes that are not a batch raise what
    ``damaged(segment file, offset reached, error)`` returns."""
    out: list[FileSlice] = []
    budget = max_bytes
    i = max(bisect_right(bases, offset) - 1, 0)
    seg = segments[i]
    try:
        while offset < limit and i < len(segments):
            seg = segments[i]
            taken, more = slice_of(seg, handles, offset, limit, budget,
                                   min_one_batch and not out)
            if taken is not None:
                out.append(taken)
                budget -= taken.length
            if not more:
                break
            i += 1
            if i < len(segments):
                offset = segments[i].base_offset
    except DecodeError as e:
        raise damaged(seg.log_path, offset, e) from e
    return out

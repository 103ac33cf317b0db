"""The newest batches appended to a segment in this process, kept in memory.

A segment (:mod:`odradek.storage.segment`) keeps the *tail* of what it
appended: each batch's last offset and file position, up to
:data:`TAIL_BATCHES`, so a fetch at the end of the log, the common case,
finds its batch with a bisect and one header read instead of reading every
header after an index entry. Nothing of it is on disk.

Invariants::

    lasts ascending; starts[i] is the position of the batch ending at lasts[i]
    the batches held are contiguous in the file and end at ``end``
    floor is the last offset of the batch before the first one held

The tail answers for an offset only while it ends where the segment ends (any
truncation makes the next append start a new one) and only for offsets above
``floor``. A full tail drops its older half.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

TAIL_BATCHES: Final = 512
"""The most batches a tail holds."""


class BatchTail:
    """One segment's tail (see the module doc)."""

    __slots__ = ("end", "floor", "lasts", "starts")

    def __init__(self) -> None:
        self.lasts: list[int] = []
        """Last offset of each batch held, ascending."""
        self.starts: list[int] = []
        """File position of each batch held."""
        self.floor = -1
        """Last offset of the batch before the first one held."""
        self.end = -1
        """File position where the last batch held ends; -1 before any."""

    def extend_at(self, position: int, next_offset: int) -> tuple[list[int], list[int]]:
        """Batches are about to be appended at ``position``, the segment's end
        (``next_offset`` its next offset): start over unless the tail ends there,
        drop the older half when full. Returns (lasts, starts) for the caller to
        append each batch to, then set :attr:`end`."""
        lasts, starts = self.lasts, self.starts
        if self.end != position or len(lasts) >= TAIL_BATCHES:
            keep = len(lasts) // 2 if self.end == position else 0
            self.floor = lasts[-keep - 1] if keep else next_offset - 1
            del lasts[:len(lasts) - keep], starts[:len(starts) - keep]
        return lasts, starts

    def answers(self, offset: int, size: int) -> bool:
        """Can the tail find ``offset`` in a segment of ``size`` bytes?"""
        return offset > self.floor and self.end == size and bool(self.lasts)

    def position_of(self, offset: int) -> int | None:
        """Position of the first batch held whose last offset is >= ``offset``; None
        when there is none (nothing at or after ``offset`` in the segment)."""
        i = bisect_left(self.lasts, offset)
        if i == len(self.lasts):
            return None
        return self.starts[i]

"""The trivial model the log is checked against: a list of batches."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.storage.log import Log
from odradek.wire.batch import iter_batches


@dataclass(frozen=True)
class MBatch:
    base: int
    last: int
    max_ts: int
    data: bytes  # exactly as the log must store it

    @property
    def size(self) -> int:
        return len(self.data)


def stored_form(batch: bytes, base_offset: int, leader_epoch: int = -1) -> bytes:
    """What the log must write for ``batch`` appended at ``base_offset`` (CreateTime)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    if leader_epoch >= 0:
        struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


@dataclass
class Model:
    batches: list[MBatch] = field(default_factory=list)
    log_start: int = 0
    hw: int = 0
    leo: int = 0

    def append(self, stored: list[bytes]) -> None:
        for data in stored:
            ((pos, h),) = iter_batches(data)
            assert pos == 0 and h.base_offset == self.leo
            self.batches.append(MBatch(h.base_offset, h.last_offset, h.max_timestamp, data))
            self.leo = h.next_offset

    def live(self) -> list[MBatch]:
        """Batches holding at least one offset >= log start."""
        return [b for b in self.batches if b.last >= self.log_start]

    def index_of(self, offset: int) -> int:
        for i, b in enumerate(self.batches):
            if b.last >= offset:
                return i
        return len(self.batches)

    def expected_read(self, offset: int, max_bytes: int, limit: int, min_one: bool = True) -> bytes:
        out: list[bytes] = []
        total = 0
        for b in self.batches[self.index_of(offset) :]:
            if b.last >= limit:
                break
            if total + b.size > max_bytes and not (min_one and not out):
                break
            out.append(b.data)
            total += b.size
        return b"".join(out)

    def expected_time_lookup(self, ts: int, limit: int) -> tuple[int, int] | None:
        for b in self.batches:
            if b.last >= self.log_start and b.max_ts >= ts:
                offset = max(b.base, self.log_start)
                return (b.max_ts, offset) if offset < limit else None
        return None

    def truncate(self, offset: int) -> None:
        """Drop every batch with last offset >= ``offset``; the log then ends at the
        first dropped batch's base, or at ``offset`` itself if that is less (in a gap)."""
        if offset >= self.leo:
            return
        keep = [b for b in self.batches if b.last < offset]
        removed = self.batches[len(keep) :]
        self.batches = keep
        self.leo = min(removed[0].base, offset) if removed else offset
        self.hw = min(self.hw, self.leo)

    def drop_from(self, leo: int) -> None:
        """After a crash: keep batches wholly below ``leo`` (a batch boundary)."""
        assert any(b.base == leo for b in self.batches) or leo == self.leo or not self.batches
        self.truncate(leo)


def check_invariants(log: Log) -> None:
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    segs = log.segments
    assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
    assert segs[-1].next_offset == log.log_end_offset
    assert segs[0].base_offset <= log.log_start_offset

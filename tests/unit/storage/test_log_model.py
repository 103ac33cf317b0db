"""The partition log against a list of batches, step by step (Hypothesis stateful).

Every step: appends, reads at every offset (with and without the HW as limit,
with random byte budgets), lookups by timestamp, retention by bytes and time,
DeleteRecords, truncation, rolls, flushes, clean reopens and crashes that tear
unsynced tails, all on the in-memory file system and a manual clock. After each
step the log's offsets equal the model's and the invariants hold.
"""

from __future__ import annotations

import dataclasses
import os
import random

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from odradek.common.clock import ManualClock
from odradek.storage import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    LogConfig,
    MemoryFileSystem,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from odradek.wire.batch import iter_batches
from tests.unit.storage.batches import make_batch
from tests.unit.storage.model import Model, check_invariants, stored_form

DIR = "/data/t-0"

batch_spec = st.tuples(
    st.integers(1, 4),  # records
    st.integers(0, 120),  # value size
    st.integers(-3_000, 3_000),  # timestamp skew
    st.booleans(),  # timestamps decreasing inside the batch
)


class LogMachine(RuleBasedStateMachine):
    @initialize(
        segment_bytes=st.integers(250, 2500),
        interval=st.sampled_from([0, 40, 150, 4096]),
        index_bytes=st.sampled_from([24, 48, 96, 10 * 1024 * 1024]),
    )
    def setup(self, segment_bytes: int, interval: int, index_bytes: int) -> None:
        self.clock = ManualClock()
        self.fs = MemoryFileSystem(self.clock)
        self.fs.makedirs("/data")
        self.fs.sync_dir("/")
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            segment_index_bytes=index_bytes,
            retention_ms=-1,
            file_delete_delay_ms=0,
        )
        self.log = Log.open(self.fs, DIR, self.config, self.clock)
        self.model = Model()

    # -- mutations ------------------------------------------------------------------

    @rule(specs=st.lists(batch_spec, min_size=1, max_size=3), epoch=st.sampled_from([-1, 7]))
    def append(self, specs: list[tuple[int, int, int, bool]], epoch: int) -> None:
        now = self.clock.now_ms()
        raw = []
        for n, size, skew, down in specs:
            stamps = [now + skew + (-i if down else i) for i in range(n)]
            raw.append(make_batch([bytes([65 + i]) * size for i in range(n)], timestamps=stamps))
        records = b"".join(raw)
        if len(records) > self.config.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.log.append(records, leader_epoch=epoch)
            return
        info = self.log.append(records, leader_epoch=epoch)
        stored = []
        offset = self.model.leo
        for (n, *_), r in zip(specs, raw, strict=True):
            stored.append(stored_form(r, offset, epoch))
            offset += n
        assert info.first_offset == self.model.leo
        self.model.append(stored)
        assert info.last_offset == self.model.leo - 1
        assert info.records == sum(n for n, *_ in specs)

    @rule(appends=st.lists(st.lists(batch_spec, min_size=1, max_size=2), min_size=2, max_size=8))
    def append_many(self, appends: list[list[tuple[int, int, int, bool]]]) -> None:
        for specs in appends:
            self.append(specs, -1)
            self.clock.advance(7)

    @rule(data=st.data())
    def advance_high_watermark(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.model.leo + 2))
        self.log.advance_high_watermark(target)
        self.model.hw = max(self.model.hw, min(target, self.model.leo))

    @rule(ms=st.integers(0, 20_000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.model.hw + 3))
        if target > self.model.hw:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.delete_records_before(target)
            return
        low = self.log.delete_records_before(target)
        self.model.log_start = max(self.model.log_start, target)
        assert low == self.model.log_start

    @rule(data=st.data())
    def retention_by_bytes(self, data: st.DataObject) -> None:
        limit = data.draw(st.integers(0, self.log.size_bytes + 10))
        self.log.update_config(dataclasses.replace(self.config, retention_bytes=limit))
        before = self.log.log_start_offset
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        self._after_retention(before)
        first = self.log.segments[0]
        if self._deletable(0):
            assert self.log.size_bytes - first.size < limit

    @rule(retention_ms=st.integers(0, 30_000))
    def retention_by_time(self, retention_ms: int) -> None:
        self.log.update_config(dataclasses.replace(self.config, retention_ms=retention_ms))
        before = self.log.log_start_offset
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        self._after_retention(before)
        if self._deletable(0):
            seg = self.log.segments[0]
            upper = self._upper(0)
            newest = max(b.max_ts for b in self.model.batches if seg.base_offset <= b.base < upper)
            assert self.clock.now_ms() - newest <= retention_ms

    def _upper(self, i: int) -> int:
        segs = self.log.segments
        return segs[i + 1].base_offset if i + 1 < len(segs) else self.log.log_end_offset

    def _deletable(self, i: int) -> bool:
        seg = self.log.segments[i]
        return seg.size > 0 and self._upper(i) <= self.log.high_watermark

    def _after_retention(self, before: int) -> None:
        start = self.log.log_start_offset
        assert start >= before
        assert start <= self.model.hw
        assert self.log.segments[0].base_offset <= start
        self.model.log_start = start

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.model.log_start, self.model.leo + 1))
        self.log.truncate_to(target)
        self.model.truncate(target)
        self.model.log_start = min(self.model.log_start, self.model.leo)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.model.leo

    @rule()
    def reopen_after_clean_shutdown(self) -> None:
        self.log.flush()
        self.log.close()
        self.log = Log.open(
            self.fs,
            DIR,
            self.config,
            self.clock,
            clean_shutdown=True,
            recovery_point=self.log.recovery_point,
            log_start_offset=self.log.log_start_offset,
            high_watermark=self.log.high_watermark,
        )
        assert self.log.load_report.recovered_segments == 0

    @rule(seed=st.integers(0, 2**32), torn=st.booleans(), data=st.data())
    def crash(self, seed: int, torn: bool, data: st.DataObject) -> None:
        durable = self.log.recovery_point
        # The checkpoint on disk may be older than the latest flush.
        checkpointed = data.draw(st.integers(0, durable))
        self.fs.crash(random.Random(seed) if torn else None, garbage=torn)
        self.log = Log.open(
            self.fs,
            DIR,
            self.config,
            self.clock,
            recovery_point=checkpointed,
            log_start_offset=self.model.log_start,
            high_watermark=self.model.hw,
        )
        leo = self.log.log_end_offset
        assert leo >= durable, "lost data below the recovery point"
        assert leo <= self.model.leo
        # What recovery kept: batches of the model, byte for byte, in order. Unsynced
        # batches may be gone, also in the middle (an earlier segment's unsynced
        # tail before a later segment that survived), which leaves an offset gap.
        m = self.model
        kept = (self.log.read_records(self.log.log_start_offset, 1 << 30)
                if leo > self.log.log_start_offset else b"")
        by_base = {b.base: b for b in m.batches}
        recovered = []
        for pos, h in iter_batches(kept):
            stored = by_base.get(h.base_offset)
            assert stored is not None and stored.data == kept[pos : pos + h.size], h.base_offset
            recovered.append(stored)
        bases = {b.base for b in recovered}
        for b in m.batches:
            if self.log.log_start_offset <= b.last < durable:
                assert b.base in bases, f"durable batch at {b.base} lost"
        below = [b for b in m.batches if b.last < self.log.log_start_offset]
        m.batches = below + recovered
        m.leo = leo
        m.hw = min(m.hw, leo)
        m.log_start = self.log.log_start_offset

    # -- observations ------------------------------------------------------------------

    @precondition(lambda self: self.model.leo - self.model.log_start <= 120)
    @rule(max_bytes=st.integers(0, 700), use_hw=st.booleans())
    def read_every_offset(self, max_bytes: int, use_hw: bool) -> None:
        m = self.model
        limit = m.hw if use_hw else m.leo
        for offset in range(m.log_start, m.leo + 1):
            got = self.log.read_records(offset, max_bytes, max_offset=limit if use_hw else None)
            assert got == m.expected_read(offset, max_bytes, limit), offset
        with pytest.raises(OffsetOutOfRangeError):
            self.log.read(m.leo + 1, 100)
        if m.log_start > 0:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(m.log_start - 1, 100)

    @rule(use_hw=st.booleans(), data=st.data())
    def lookup_timestamps(self, use_hw: bool, data: st.DataObject) -> None:
        m = self.model
        limit = m.hw if use_hw else m.leo
        max_offset = limit if use_hw else None
        stamps = sorted({b.max_ts + d for b in m.batches for d in (-1, 0, 1)} | {0, 2**62})
        for ts in data.draw(st.lists(st.sampled_from(stamps), max_size=12)):
            got = self.log.list_offsets(ts, max_offset=max_offset)
            expected = m.expected_time_lookup(ts, limit)
            assert (got.timestamp, got.offset) == (expected or (-1, -1)), ts
        assert self.log.list_offsets(EARLIEST_TIMESTAMP).offset == m.log_start
        assert self.log.list_offsets(LATEST_TIMESTAMP, max_offset=max_offset).offset == limit
        present = [b for b in m.batches if b.base >= self.log.segments[0].base_offset]
        got = self.log.list_offsets(MAX_TIMESTAMP, max_offset=max_offset)
        if present:
            top = max(b.max_ts for b in present)
            first = next(b for b in present if b.max_ts == top)
            offset = max(first.base, m.log_start)
            assert (got.timestamp, got.offset) == ((top, offset) if offset < limit else (-1, -1))
        else:
            assert got.offset == -1

    @invariant()
    def offsets_agree(self) -> None:
        if not hasattr(self, "log"):
            return
        check_invariants(self.log)
        assert self.log.log_end_offset == self.model.leo
        assert self.log.log_start_offset == self.model.log_start
        assert self.log.high_watermark == self.model.hw


LogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("LOG_MODEL_EXAMPLES", "120")),
    stateful_step_count=50,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLogAgainstModel = LogMachine.TestCase

"""The cleaner against a model dictionary (Hypothesis stateful, on MemoryFileSystem).

Steps: produce keyed records and tombstones, roll, let time pass, clean (a whole
pass, or one interrupted by a crash at any of its steps: after the cleaned file
is written, after the swap is decided, after the old segments are renamed), and
crash (unsynced bytes are lost; everything is flushed before a pass, as the
broker's cleaner only takes segments below the recovery point in practice).
After every step a read from the log start yields, for each key, its latest
value at its original offset, in offset order; every record read is one that
was written at that offset; and a tombstone is gone only once
``delete.retention.ms`` has passed since a pass kept it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.storage.cleaner import CleanerSettings, CleanerView, CleanJob, plan_pass
from odradek.wire.records import Record, build_batch, decode_batches

DIR = "/data/t-0"
RETENTION = 1_000
KEYS = [f"k{i}".encode() for i in range(6)]


class CleanerMachine(RuleBasedStateMachine):
    @initialize(segment_bytes=st.integers(150, 700), map_entries=st.sampled_from([2, 3, 1000]))
    def setup(self, segment_bytes: int, map_entries: int) -> None:
        self.clock = ManualClock(1_700_000_000_000)
        self.fs = MemoryFileSystem(self.clock)
        self.fs.makedirs("/data")
        self.fs.sync_dir("/")
        self.config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1,
                                file_delete_delay_ms=0, cleanup_policy="compact",
                                delete_retention_ms=RETENTION, min_cleanable_dirty_ratio=0.0)
        self.settings = CleanerSettings(dedupe_buffer_size=map_entries * 24)
        self.log = Log.open(self.fs, DIR, self.config, self.clock)
        self.written: dict[int, tuple[bytes, bytes | None]] = {}
        """offset -> (key, value) of every record ever appended (acknowledged)."""
        self.tombstone_kept_at: dict[int, int] = {}
        """offset of a latest tombstone -> when a pass first kept it."""

    # -- steps ------------------------------------------------------------------------

    @rule(items=st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1,
                         max_size=4))
    def produce(self, items: list[tuple[bytes, bool]]) -> None:
        now = self.clock.now_ms()
        base = self.log.log_end_offset
        records = [Record(i, now, key, None if tomb else b"v%d" % (base + i))
                   for i, (key, tomb) in enumerate(items)]
        info = self.log.append(build_batch(records))
        self.log.advance_high_watermark(self.log.log_end_offset)
        for r in records:
            self.written[info.first_offset + r.offset] = (r.key or b"", r.value)

    @rule()
    def roll(self) -> None:
        if self.log.active_segment.size:
            self.log.roll()

    @rule(ms=st.sampled_from([10, 400, 1_500]))
    def wait(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(interrupt=st.sampled_from([None, "written", "decided"]))
    def clean(self, interrupt: str | None) -> None:
        self.log.flush()
        view = CleanerView(self.log.high_watermark, ())
        job = plan_pass(self.log, view, self.settings, self.clock.now_ms(),
                        lambda _job, _err: None, force=True)
        if job is None:
            return
        job.run()
        if interrupt == "written":
            self._crash()  # the .cleaned files are left behind
            return
        if interrupt == "decided":
            self._decide_then_crash(job)
            return
        job.complete(None)
        self._note_kept_tombstones()
        if job.swapped == len(job.plan.groups):
            self._check_compacted_below(job.plan.map_end)

    def _check_compacted_below(self, map_end: int) -> None:
        """A whole pass leaves no superseded record below the map's end."""
        stored = {o: kv for o, kv in self._read().items() if o < map_end}
        newest: dict[bytes, int] = {}
        for offset, (key, _) in stored.items():
            newest[key] = offset
        for offset, (key, _) in stored.items():
            assert newest[key] == offset, (
                f"{key!r} at {offset} survived a pass although {newest[key]} replaces it")

    def _decide_then_crash(self, job: CleanJob) -> None:
        group = job.plan.groups[0] if job.plan.groups else None
        if group is not None:
            live = group.cleaned_path[: -len(".cleaned")]
            self.fs.rename(group.cleaned_path, live + ".swap")
            self.fs.sync_dir(DIR)
        self._crash()  # start-up finishes the swap
        self._note_kept_tombstones()

    @rule()
    def crash(self) -> None:
        self.log.flush()
        self._crash()

    def _crash(self) -> None:
        self.fs.crash()
        self.log = Log.open(self.fs, DIR, self.config, self.clock,
                            recovery_point=0, high_watermark=None)
        self.log.advance_high_watermark(self.log.log_end_offset)
        # Nothing acknowledged may go: every record written was flushed first.

    def _note_kept_tombstones(self) -> None:
        now = self.clock.now_ms()
        for offset, (_, value) in self._read().items():
            if value is None:
                self.tombstone_kept_at.setdefault(offset, now)

    # -- checks ---------------------------------------------------------------------------

    def _read(self) -> dict[int, tuple[bytes, bytes | None]]:
        data = self.log.read_records(self.log.log_start_offset, 1 << 30,
                                     max_offset=self.log.log_end_offset)
        out: dict[int, tuple[bytes, bytes | None]] = {}
        for _, records in decode_batches(data):
            for r in records:
                assert r.offset not in out, f"offset {r.offset} twice"
                out[r.offset] = (r.key or b"", r.value)
        return out

    @invariant()
    def latest_value_of_every_key_is_readable(self) -> None:
        stored = self._read()
        assert list(stored) == sorted(stored)
        for offset, kv in stored.items():
            assert self.written.get(offset) == kv, f"offset {offset} changed"
        latest: dict[bytes, int] = {}
        for offset, (key, _) in sorted(self.written.items()):
            if offset < self.log.log_end_offset:
                latest[key] = offset
        newest_stored: dict[bytes, int] = {}
        for offset, (key, _) in stored.items():
            newest_stored[key] = offset
        for key, offset in newest_stored.items():
            assert offset == latest[key], (
                f"{key!r}: an older record ({offset}) is read as the latest ({latest[key]})")
        now = self.clock.now_ms()
        for key, offset in latest.items():
            if offset in stored:
                continue
            value = self.written[offset][1]
            kept_at = self.tombstone_kept_at.get(offset)
            assert value is None, f"latest value of {key!r} at {offset} lost"
            assert kept_at is not None and now >= kept_at + RETENTION, (
                f"tombstone of {key!r} at {offset} removed before delete.retention.ms")
        assert self.log.log_end_offset == max(self.written, default=-1) + 1


TestCleaner = CleanerMachine.TestCase
TestCleaner.settings = settings(max_examples=100, stateful_step_count=50, deadline=None,
                                suppress_health_check=[HealthCheck.too_slow])

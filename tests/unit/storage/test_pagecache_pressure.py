"""Adaptive drop-behind (issue 39): the kernel's memory report and the policy on it.

The reading of ``/proc`` is parsed from files a test writes; the decision
(:func:`plan`) and the trimmer's bookkeeping run on injected readings, with
drops recorded instead of run. Under pressure a log is cut to its window;
without, it keeps what it wrote until the total bound, which drops the oldest
bytes of all logs first and never a log's newest window.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from odradek.common.clock import ManualClock
from odradek.storage.config import LogManagerConfig
from odradek.storage.manager import LogManager
from odradek.storage.memfs import MemoryFileSystem
from odradek.storage.mempressure import (
    MemoryReading,
    PressureGauge,
    parse_meminfo,
    parse_psi,
    read_proc,
    under_pressure,
)
from odradek.storage.pagecache import CacheWindow, PageCacheTrimmer, default_retain, plan
from tests.unit.storage.batches import make_batch

GiB = 1 << 30
CALM = MemoryReading(0.0, 20 * GiB, 24 * GiB)
PRESSED = MemoryReading(42.0, 20 * GiB, 24 * GiB)

MEMINFO = "MemTotal:       24683652 kB\nMemFree:  100 kB\nMemAvailable:   23954744 kB\n"
PSI = ("some avg10=12.50 avg60=3.00 avg300=1.00 total=123\n"
       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


# ------------------------------------------------------------------- the reading


def test_psi_and_meminfo_are_parsed_in_bytes_and_percent() -> None:
    assert parse_psi(PSI) == 12.5
    assert parse_psi("full avg10=3.00\n") is None
    assert parse_meminfo(MEMINFO) == (23954744 * 1024, 24683652 * 1024)
    assert parse_meminfo("") == (0, 0)


def test_read_proc_falls_back_to_meminfo_where_pressure_is_missing(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text(MEMINFO)
    reading = read_proc(str(tmp_path))  # no pressure/ directory: a container
    assert reading == MemoryReading(None, 23954744 * 1024, 24683652 * 1024)
    (tmp_path / "pressure").mkdir()
    (tmp_path / "pressure" / "memory").write_text(PSI)
    assert read_proc(str(tmp_path)).psi_some_avg10 == 12.5


def test_pressure_is_psi_above_the_threshold_or_little_memory_available() -> None:
    assert not under_pressure(CALM)
    assert under_pressure(PRESSED)
    assert under_pressure(MemoryReading(None, 1 * GiB, 24 * GiB))  # no PSI: MemAvailable
    assert under_pressure(MemoryReading(0.0, 1 * GiB, 24 * GiB))
    assert not under_pressure(MemoryReading(None, 0, 0))  # nothing known: no pressure


def test_the_gauge_reads_at_most_once_per_interval() -> None:
    clock = ManualClock()
    readings = [CALM, PRESSED]
    gauge = PressureGauge(lambda: readings[0], clock.monotonic_ms, interval_ms=1000)
    assert not gauge.under_pressure()
    readings[0] = PRESSED
    for _ in range(100):
        assert not gauge.under_pressure()  # the last reading, /proc untouched
    assert gauge.reads == 1
    clock.advance(1000)
    assert gauge.under_pressure() and gauge.reads == 2


# -------------------------------------------------------------------- the policy


def test_plan_under_pressure_drops_behind_to_the_window() -> None:
    assert plan(30, 30, window=10, step=4, retain=1000, pressure=True) == (20, 0)
    assert plan(13, 13, window=10, step=4, retain=1000, pressure=True) == (0, 0)


def test_plan_without_pressure_keeps_everything_below_the_bound() -> None:
    assert plan(500, 900, window=10, step=4, retain=1000, pressure=False) == (0, 0)


def test_plan_past_the_bound_drops_the_excess_of_all_logs() -> None:
    assert plan(500, 1007, window=10, step=4, retain=1000, pressure=False) == (0, 7)
    assert plan(500, 1003, window=10, step=4, retain=1000, pressure=False) == (0, 0)


def test_plan_with_retain_zero_is_the_fixed_window() -> None:
    assert plan(30, 30, window=10, step=4, retain=0, pressure=False) == (20, 0)


def test_default_retain_is_half_the_memory_and_zero_when_unknown() -> None:
    assert default_retain(24 * GiB) == 12 * GiB
    assert default_retain(0) == 0


# ------------------------------------------------------------------- the trimmer


class _Fake:
    """A trimmer on a settable reading whose drops are recorded, not run."""

    def __init__(self, window: int, step: int, retain: int) -> None:
        self.reading = CALM
        self.clock = ManualClock()
        gauge = PressureGauge(lambda: self.reading, self.clock.monotonic_ms, interval_ms=0)
        self.trimmer = PageCacheTrimmer(MemoryFileSystem(), window, step, retain, gauge)
        self.drops: list[tuple[str, int, int]] = []
        self.written_back: list[tuple[str, int, int]] = []

        def submit(path: str, start: int, end: int, keep: bool = False) -> None:
            (self.written_back if keep else self.drops).append((path, start, end))

        self.trimmer.submit = submit  # type: ignore[method-assign]

    def log(self) -> CacheWindow:
        win = self.trimmer.window_for()
        assert win is not None
        return win


def test_without_pressure_a_log_keeps_everything_it_wrote() -> None:
    fake = _Fake(window=10, step=4, retain=1000)
    win = fake.log()
    for end in range(0, 500, 3):
        win.wrote("a.log", end)
    assert fake.drops == [] and win.cached_bytes == 498 == fake.trimmer.total


def test_what_a_log_keeps_beyond_its_window_is_written_back_early() -> None:
    fake = _Fake(window=10, step=4, retain=1000)
    win = fake.log()
    for end in range(1, 41):
        win.wrote("a.log", end)
    assert fake.drops == [] and win.cached_bytes == 40
    # once a step of it is older than the window, in steps, never the window
    assert fake.written_back == [("a.log", 0, 6), ("a.log", 6, 10), ("a.log", 10, 14),
                                 ("a.log", 14, 18), ("a.log", 18, 22), ("a.log", 22, 26),
                                 ("a.log", 26, 30)]
    win.wrote("b.log", 8)  # rolled: a was fsynced on the roll, b starts clean
    win.wrote("b.log", 16)
    assert fake.written_back[7:] == [("b.log", 0, 6)]
    assert fake.drops == []


def test_under_pressure_a_log_is_cut_to_its_window() -> None:
    fake = _Fake(window=10, step=4, retain=1000)
    fake.reading = PRESSED
    win = fake.log()
    for end in range(1, 101):
        win.wrote("a.log", end)
        assert win.cached_bytes <= 10 + 4
    assert fake.drops[0] == ("a.log", 0, 4)
    assert sum(b - a for _, a, b in fake.drops) == 100 - win.cached_bytes


def test_when_pressure_starts_every_log_is_cut_to_its_window() -> None:
    fake = _Fake(window=10, step=4, retain=1000)
    a, b = fake.log(), fake.log()
    a.wrote("a.log", 200)  # a quiet log holding much
    b.wrote("b.log", 100)
    assert fake.drops == []
    fake.reading = PRESSED
    b.wrote("b.log", 104)  # b's next step: the policy looks, sees pressure
    assert a.cached_bytes == 10 and b.cached_bytes == 10
    assert ("a.log", 0, 190) in fake.drops and ("b.log", 0, 94) in fake.drops
    fake.reading = CALM
    b.wrote("b.log", 300)  # pressure gone: kept again
    assert b.cached_bytes == 206


def test_the_bound_drops_the_oldest_of_all_logs_first_never_a_window() -> None:
    fake = _Fake(window=10, step=4, retain=100)
    a, b = fake.log(), fake.log()
    for end in range(4, 64, 4):
        a.wrote("a.log", end)  # a writes first: 60 bytes
    for end in range(4, 64, 4):
        b.wrote("b.log", end)  # then b: 60 more, 20 over the bound
    assert fake.drops and all(path == "a.log" for path, _, _ in fake.drops)
    assert fake.trimmer.total <= 100 + 4
    for end in range(64, 400, 4):
        b.wrote("b.log", end)  # b alone goes on: a is cut to its window, then b's oldest
    assert a.cached_bytes == 10
    assert fake.trimmer.total <= 100 + 4
    assert b.cached_bytes == fake.trimmer.total - 10


def test_the_bound_reaches_bytes_no_mark_covers_yet() -> None:
    fake = _Fake(window=0, step=4, retain=1)
    a, b = fake.log(), fake.log()
    a.wrote("a.log", 3)  # less than a step: the policy has not looked, no mark
    b.wrote("b.log", 4)  # 7 in all, 6 over: b's marked 4, then 2 of a's unmarked 3
    assert fake.drops == [("b.log", 0, 4), ("a.log", 0, 2)]
    assert fake.trimmer.total == 1 == a.cached_bytes


@given(st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 30),
                          st.booleans()), max_size=80),
       st.integers(0, 20), st.integers(1, 8), st.integers(1, 120))
def test_drops_stay_in_order_and_the_books_balance(
        writes: list[tuple[int, bool, int, bool]], window: int, step: int,
        retain: int) -> None:
    fake = _Fake(window, step, retain)
    logs = [fake.log() for _ in range(3)]
    ends: dict[str, int] = {}
    paths = [f"l{i}-0.log" for i in range(3)]
    for n, (which, roll, grow, pressed) in enumerate(writes):
        fake.reading = PRESSED if pressed else CALM
        if roll:
            paths[which] = f"l{which}-{n}.log"
        path = paths[which]
        ends[path] = ends.get(path, 0) + grow
        logs[which].wrote(path, ends[path])
        assert fake.trimmer.total == sum(w.cached_bytes for w in logs)
        if pressed:
            assert logs[which].cached_bytes < window + 2 * step
        else:
            # over the bound by a step or more only with what the windows keep
            assert (fake.trimmer.total < retain + 2 * step
                    or fake.trimmer.total <= sum(min(w.cached_bytes, window + step)
                                                 for w in logs) + retain + step)
    dropped: dict[str, int] = {}
    for p, a, b in fake.drops:
        assert a == dropped.get(p, 0) and b > a  # each file front to back, no overlap
        assert b <= ends[p]
        dropped[p] = b
    assert sum(ends.values()) - sum(dropped.values()) == fake.trimmer.total


# ------------------------------------------------------------------- the manager


def test_a_manager_keeps_what_logs_wrote_until_the_kernel_reports_pressure() -> None:
    fs, clock = MemoryFileSystem(), ManualClock()
    reading = [CALM]
    config = LogManagerConfig(log_dir="/d", page_cache_window_bytes=1000)
    mgr = LogManager(fs, clock, config, memory=lambda: reading[0])
    mgr.startup()
    assert mgr.page_cache.retain == 12 * GiB  # half of the reading's MemTotal
    log = mgr.get_or_create_log("t", 0)
    for _ in range(200):
        log.append(make_batch([b"x" * 50000]))
    assert fs.dropped == []
    reading[0] = PRESSED
    clock.advance(1000)  # the gauge reads again a second later
    for _ in range(200):
        log.append(make_batch([b"x" * 50000]))
    mgr.page_cache.close()
    assert fs.dropped and fs.dropped[0][1] == 0
    assert mgr.page_cache.total <= 1000 + (4 << 20)
    mgr.close()


def test_a_deleted_log_no_longer_counts_toward_the_bound() -> None:
    mgr = LogManager(MemoryFileSystem(), ManualClock(),
                     LogManagerConfig(log_dir="/d", page_cache_window_bytes=1000),
                     memory=lambda: CALM)
    mgr.startup()
    for partition in (0, 1):
        log = mgr.get_or_create_log("t", partition)
        for _ in range(100):
            log.append(make_batch([b"x" * 50000]))
    assert mgr.page_cache.total > 2 * 100 * 50000
    kept = mgr.get_or_create_log("t", 1).local.cache_window
    assert kept is not None
    mgr.delete_log("t", 0)
    assert mgr.page_cache.total == kept.cached_bytes > 100 * 50000
    mgr.close()


def test_a_model_file_system_keeps_the_fixed_window() -> None:
    mgr = LogManager(MemoryFileSystem(), ManualClock(), LogManagerConfig(log_dir="/d"))
    assert mgr.page_cache.retain == 0
    assert mgr.page_cache.window_for() is not None

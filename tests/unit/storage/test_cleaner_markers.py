"""Transactions under the cleaner: aborted data goes, a marker goes once its
transaction's data is gone and delete.retention.ms has passed (an ABORT marker
with its .txnindex entry and the partition's aborted entry), and a producer's
last batch stays."""

from __future__ import annotations

from odradek.common.clock import ManualClock
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.storage.cleaner import CleanerSettings, CleanerView, plan_pass
from odradek.wire.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    build_batch,
    control_record,
    decode_batches,
    read_marker,
)

DIR = "/data/t-0"
RETENTION = 1_000


def _txn(log: Log, clock: ManualClock, pid: int, seq: int, keys: list[bytes]) -> None:
    records = [Record(i, clock.now_ms(), k, b"t-" + k) for i, k in enumerate(keys)]
    log.append(build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq,
                           transactional=True))


def _marker(log: Log, clock: ManualClock, pid: int, commit: bool) -> int:
    kind = CONTROL_COMMIT if commit else CONTROL_ABORT
    batch = build_batch([control_record(kind, offset=0, timestamp=clock.now_ms())],
                        producer_id=pid, producer_epoch=0, transactional=True, control=True)
    return log.append(batch, checked=log.check(batch, allow_control=True)).first_offset


def _plain(log: Log, clock: ManualClock, keys: list[bytes]) -> None:
    log.append(build_batch([Record(i, clock.now_ms(), k, b"p-" + k)
                            for i, k in enumerate(keys)]))


def _clean(log: Log, clock: ManualClock, aborted: list[tuple[int, int, int]]) -> None:
    log.roll()
    log.flush()
    log.advance_high_watermark(log.log_end_offset)
    job = plan_pass(log, CleanerView(log.log_end_offset, aborted), CleanerSettings(),
                    clock.now_ms(), lambda _j, _e: None, force=True)
    assert job is not None
    job.run()
    job.complete(None)
    assert job.swapped == len(job.plan.groups)


def _contents(log: Log) -> tuple[dict[int, str], list[bytes]]:
    data = log.read_records(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset)
    markers: dict[int, str] = {}
    values: list[bytes] = []
    pos = 0
    for header, records in decode_batches(data):
        if header.is_control:
            kind, _ = read_marker(data, pos)
            markers[header.base_offset] = "COMMIT" if kind == CONTROL_COMMIT else "ABORT"
        else:
            values += [r.value or b"" for r in records]
        pos += header.size
    return markers, values


def test_markers_after_their_data_is_gone() -> None:
    clock = ManualClock(1_700_000_000_000)
    fs = MemoryFileSystem(clock)
    fs.makedirs("/data")
    log = Log.open(fs, DIR, LogConfig(segment_bytes=100_000, cleanup_policy="compact",
                                      delete_retention_ms=RETENTION, file_delete_delay_ms=0),
                   clock)
    _txn(log, clock, 5, 0, [b"a", b"b"])              # 0-1
    commit = _marker(log, clock, 5, commit=True)       # 2
    _txn(log, clock, 6, 0, [b"c"])                     # 3
    abort = _marker(log, clock, 6, commit=False)       # 4
    _plain(log, clock, [b"a", b"b"])                   # 5-6: supersede the commit's data
    _txn(log, clock, 5, 2, [b"d"])                     # 7
    _marker(log, clock, 5, commit=True)                # 8: producer 5's last batch
    _marker(log, clock, 6, commit=True)                # 9: producer 6's last batch
    aborted = [(6, 3, abort)]
    from odradek.storage.txnfiles import AbortedEntry

    log.append_aborted(AbortedEntry(6, 3, abort, abort + 1))
    removed: list[set[int]] = []

    class Listener:
        """The partition's side, as far as this test needs it."""

        def producer_snapshot(self) -> bytes:
            return b""

        def writes_rolled_back(self) -> None:
            raise AssertionError("no write fails here")

        def cleaner_view(self) -> CleanerView:
            raise AssertionError("the test hands the cleaner its view")

        def aborts_removed(self, marker_offsets: set[int]) -> None:
            removed.append(marker_offsets)

    log.attach(Listener())

    _clean(log, clock, aborted)
    markers, values = _contents(log)
    assert b"t-c" not in values  # aborted data goes at once
    assert markers[commit] == "COMMIT"  # stamped, kept until the horizon
    assert markers[abort] == "ABORT"

    clock.advance(RETENTION + 1)
    _plain(log, clock, [b"e"])
    _clean(log, clock, aborted)
    markers, values = _contents(log)
    assert commit not in markers  # data gone and the horizon passed
    assert abort not in markers
    assert removed == [{abort}]  # the partition drops its aborted entry
    assert log.txn_files.aborted(log.segment_bases) == []  # and so does the .txnindex
    assert 8 in markers and 9 in markers  # each producer's last batch stays
    assert values == [b"p-a", b"p-b", b"t-d", b"p-e"]


def test_the_io_limit_paces_a_pass(monkeypatch: object) -> None:
    import odradek.storage.cleaner_io as cleaner_io

    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(cleaner_io.time, "monotonic", lambda: now[0])  # type: ignore[attr-defined]
    monkeypatch.setattr(cleaner_io.time, "sleep", sleep)  # type: ignore[attr-defined]
    throttle = cleaner_io.Throttle(1_000_000)  # 1 MB/s
    for _ in range(10):
        throttle.spend(200_000)
    assert abs(sum(slept) - 2.0) < 1e-6  # 2 MB at 1 MB/s with no time spent otherwise
    free = cleaner_io.Throttle(float("inf"))
    free.spend(10**9)
    assert len(slept) == 10


def test_a_swap_finished_at_start_up_drops_the_entries_of_removed_abort_markers() -> None:
    from odradek.storage.txnfiles import AbortedEntry

    clock = ManualClock(1_700_000_000_000)
    fs = MemoryFileSystem(clock)
    fs.makedirs("/data")
    fs.sync_dir("/")
    config = LogConfig(segment_bytes=100_000, cleanup_policy="compact",
                       delete_retention_ms=RETENTION, file_delete_delay_ms=0)
    log = Log.open(fs, DIR, config, clock)
    _txn(log, clock, 6, 0, [b"c"])                     # 0
    abort = _marker(log, clock, 6, commit=False)       # 1
    log.append_aborted(AbortedEntry(6, 0, abort, abort + 1))
    _txn(log, clock, 6, 1, [b"d"])                     # 2
    _marker(log, clock, 6, commit=True)                # 3: producer 6's last batch
    aborted = [(6, 0, abort)]
    _clean(log, clock, aborted)                        # stamps the ABORT marker
    clock.advance(RETENTION + 1)
    _plain(log, clock, [b"e"])
    log.roll()
    log.flush()
    log.advance_high_watermark(log.log_end_offset)
    job = plan_pass(log, CleanerView(log.log_end_offset, aborted), CleanerSettings(),
                    clock.now_ms(), lambda _j, _e: None, force=True)
    assert job is not None
    job.run()
    (group,) = job.plan.groups
    fs.rename(group.cleaned_path, group.cleaned_path[: -len(".cleaned")] + ".swap")
    fs.sync_dir(DIR)
    fs.crash()  # decided, not finished: start-up finishes it
    again = Log.open(fs, DIR, config, clock)
    markers, values = _contents(again)
    assert abort not in markers
    assert again.txn_files.aborted(again.segment_bases) == []
    assert values == [b"t-d", b"p-e"]

"""``storage.writes.run_jobs``: a writer thread's turn writes back-to-back jobs
of a log with one ``pwritev``, with the same outcome as running them one by one;
a failed combined write fails the first job and skips the rest, and the log
rolls back to its written end and takes the next append."""

from __future__ import annotations

import errno
from typing import Any

from odradek.common.clock import ManualClock
from odradek.storage import MemoryFileSystem
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.writes import AppendJob, SkippedWrite, run_jobs
from odradek.wire.records import decode_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


class HeldSink:
    def __init__(self) -> None:
        self.jobs: list[AppendJob] = []

    def submit(self, job: AppendJob) -> None:
        self.jobs.append(job)


class CountingFs:
    """The file system the log's write stream opens through, counting pwrites."""

    def __init__(self, fs: MemoryFileSystem) -> None:
        self.fs = fs
        self.pwrites = 0

    def open(self, path: str, **kw: Any) -> Any:
        handle = self.fs.open(path, **kw)
        outer = self

        class Counted:
            def __getattr__(self, name: str) -> Any:
                return getattr(handle, name)

            def pwrite(self, position: int, chunks: Any) -> None:
                outer.pwrites += 1
                handle.pwrite(position, chunks)

        return Counted()


def open_log(**config: Any) -> tuple[Log, MemoryFileSystem, HeldSink, CountingFs]:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    log = Log.open(fs, "/d/t-0", LogConfig(**config), clock)
    sink = HeldSink()
    log.write_sink = sink
    counting = CountingFs(fs)
    log.local.queue.stream.fs = counting  # type: ignore[assignment]
    return log, fs, sink, counting


def values(log: Log) -> list[bytes | None]:
    data = log.read_records(log.log_start_offset, 1 << 20)
    return [r.value for _, b in decode_batches(data) for r in b]


def test_back_to_back_jobs_are_one_write_and_read_back_in_order() -> None:
    log, _, sink, counting = open_log()
    for i in range(5):
        log.append(make_batch([f"v{i}".encode()], timestamps=NOW))
    assert len(sink.jobs) == 5 and log.log_end_offset == 0
    run_jobs(sink.jobs)
    assert counting.pwrites == 1
    for job in sink.jobs:
        assert job.ran and job.error is None
        job.complete(job.error)
    assert log.log_end_offset == 5
    assert values(log) == [f"v{i}".encode() for i in range(5)]


def test_a_roll_splits_the_turn_into_one_write_per_segment() -> None:
    one = len(make_batch([b"x" * 100], timestamps=NOW))
    log, _, sink, counting = open_log(segment_bytes=3 * one)
    for i in range(6):
        log.append(make_batch([f"{i}".encode() * 100], timestamps=NOW))
    segments = {id(job.seg) for job in sink.jobs}
    assert len(segments) == 2
    run_jobs(sink.jobs)
    assert counting.pwrites == 2
    for job in sink.jobs:
        job.complete(job.error)
    assert log.log_end_offset == 6
    assert values(log) == [f"{i}".encode() * 100 for i in range(6)]


def test_a_failed_combined_write_fails_the_first_skips_the_rest_and_rolls_back() -> None:
    log, fs, sink, _ = open_log()
    log.append(make_batch([b"kept"], timestamps=NOW))
    run_jobs(sink.jobs)
    sink.jobs[0].complete(sink.jobs[0].error)
    sink.jobs.clear()
    written = fs.size("/d/t-0/00000000000000000000.log")

    for i in range(3):
        log.append(make_batch([f"lost{i}".encode()], timestamps=NOW))
    fs.fail_next_write("t-0", keep_bytes=10, err=errno.ENOSPC)
    run_jobs(sink.jobs)
    first, *rest = sink.jobs
    assert isinstance(first.error, OSError) and first.error.errno == errno.ENOSPC
    assert all(isinstance(job.error, SkippedWrite) for job in rest)
    assert all(job.ran for job in sink.jobs)
    assert fs.size("/d/t-0/00000000000000000000.log") == written  # cut back
    for job in sink.jobs:
        job.complete(job.error)
        assert job.failure is not None  # each append is answered with the error
    assert log.log_end_offset == 1
    sink.jobs.clear()

    log.append(make_batch([b"after"], timestamps=NOW))  # a full disk leaves the log online
    run_jobs(sink.jobs)
    sink.jobs[0].complete(sink.jobs[0].error)
    assert values(log) == [b"kept", b"after"]

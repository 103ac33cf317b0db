"""LogManager: start-up, checkpoints, clean shutdown, deletion, housekeeping, the fd cap."""

from __future__ import annotations

import uuid

from odradek.common.clock import ManualClock
from odradek.storage import (
    CheckpointJob,
    FlushJob,
    LogConfig,
    LogManager,
    LogManagerConfig,
    MemoryFileSystem,
)
from odradek.storage.checkpoint import read_offsets
from odradek.storage.deletes import RemoveDeletedJob
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
DIR = "/var/kafka-logs"


def manager(fs: MemoryFileSystem, clock: ManualClock, **config: object) -> LogManager:
    mgr = LogManager(
        fs,
        clock,
        LogManagerConfig(log_dir=DIR, **config),  # type: ignore[arg-type]
        LogConfig(segment_bytes=400, file_delete_delay_ms=1000),
    )
    mgr.startup()
    return mgr


def fill(mgr: LogManager, topic: str, partition: int, n: int) -> None:
    log = mgr.get_or_create_log(topic, partition)
    for _ in range(n):
        log.append(make_batch([b"x" * 50]))
    log.advance_high_watermark(log.log_end_offset)


def test_clean_restart_reopens_without_recovery() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr, "orders", 0, 20)
    fill(mgr, "orders", 1, 3)
    fill(mgr, "my-topic.v2", 7, 1)
    mgr.close()
    assert fs.exists(f"{DIR}/.kafka_cleanshutdown")
    assert read_offsets(fs, f"{DIR}/recovery-point-offset-checkpoint") == {
        ("orders", 0): 20,
        ("orders", 1): 3,
        ("my-topic.v2", 7): 1,
    }
    assert read_offsets(fs, f"{DIR}/replication-offset-checkpoint")[("orders", 0)] == 20
    fs.crash()  # everything that matters was synced by close()
    mgr = manager(fs, clock)
    assert mgr.had_clean_shutdown
    assert not fs.exists(f"{DIR}/.kafka_cleanshutdown")
    log = mgr.get_log("orders", 0)
    assert log is not None
    assert (log.log_end_offset, log.high_watermark) == (20, 20)
    assert log.load_report.recovered_segments == 0
    assert sorted(mgr.logs()) == [("my-topic.v2", 7), ("orders", 0), ("orders", 1)]


def test_unclean_restart_recovers_from_the_checkpointed_recovery_point() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr, "t", 0, 10)
    log = mgr.get_log("t", 0)
    assert log is not None
    log.flush()
    mgr.write_checkpoints()
    fill(mgr, "t", 0, 5)  # never flushed
    fs.crash()
    mgr = manager(fs, clock)
    assert not mgr.had_clean_shutdown
    log = mgr.get_log("t", 0)
    assert log is not None and log.log_end_offset == 10
    assert log.load_report.recovered_segments >= 1


def test_tick_hands_out_flush_and_checkpoint_jobs_and_a_deadline() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, high_watermark_checkpoint_interval_ms=5000)
    log = mgr.get_or_create_log("t", 0, LogConfig(flush_ms=1000))
    log.append(make_batch([b"x"]))
    tick = mgr.tick()
    assert tick.jobs == [] and tick.next_deadline_ms == clock.monotonic_ms() + 1000
    clock.advance(1000)
    tick = mgr.tick()
    (job,) = tick.jobs
    assert isinstance(job, FlushJob)
    job.run()
    job.complete()
    assert log.recovery_point == 1
    clock.advance(4000)
    (job,) = mgr.tick().jobs
    assert isinstance(job, CheckpointJob)
    job.run()
    job.complete()
    assert read_offsets(fs, f"{DIR}/replication-offset-checkpoint") == {("t", 0): 0}


def test_tick_runs_retention() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, retention_check_interval_ms=300_000)
    log = mgr.get_or_create_log("t", 0, LogConfig(segment_bytes=300, retention_bytes=0))
    for _ in range(6):
        log.append(make_batch([b"x" * 40]))
    log.advance_high_watermark(6)
    mgr.tick()
    assert len(log.segments) == 3
    clock.advance(300_000)
    mgr.tick()
    assert log.log_start_offset == 6
    deleted = [p for p in fs.walk_files() if p.endswith(".deleted")]
    assert deleted
    # after file.delete.delay.ms the unlinks come back as a job, run off the loop
    clock.advance(LogConfig().file_delete_delay_ms)
    (job,) = [j for j in mgr.tick().jobs if isinstance(j, RemoveDeletedJob)]
    assert sorted(job.files) == sorted(deleted) and job.paths == []
    assert all(fs.exists(p) for p in deleted)
    job.run()
    job.complete()
    assert not any(p.endswith(".deleted") for p in fs.walk_files())
    assert not any(isinstance(j, RemoveDeletedJob) for j in mgr.tick().jobs)


def test_delete_log_renames_then_removes() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr, "gone", 0, 3)
    mgr.delete_log("gone", 0)
    assert mgr.get_log("gone", 0) is None
    (deleted,) = fs.listdir(DIR)
    assert deleted.startswith("gone-0.") and deleted.endswith("-delete")
    assert not any(isinstance(j, RemoveDeletedJob) for j in mgr.tick().jobs)  # not yet due
    clock.advance(1000)
    (job,) = [j for j in mgr.tick().jobs if isinstance(j, RemoveDeletedJob)]
    assert fs.listdir(DIR) == [deleted]  # removal is the job's, run off the loop
    job.run()
    job.complete()
    assert fs.listdir(DIR) == []
    assert not any(isinstance(j, RemoveDeletedJob) for j in mgr.tick().jobs)


def test_partition_metadata_keeps_the_topic_id() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    topic_id = uuid.uuid4()
    mgr.get_or_create_log("t", 0, topic_id=topic_id)
    mgr.close()
    mgr = manager(fs, clock)
    log = mgr.get_log("t", 0)
    assert log is not None and log.topic_id == topic_id


def test_open_files_stay_under_the_cap_with_many_partitions() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, max_open_files=40)
    for p in range(300):
        fill(mgr, "many", p, 2)
        assert fs.open_handles <= 40
    for p in range(300):
        log = mgr.get_log("many", p)
        assert log is not None and len(log.read_records(0, 10_000)) > 0
    assert mgr.open_files <= 40 and fs.open_handles <= 40
    mgr.close()
    assert fs.open_handles == 0
    mgr = manager(fs, clock, max_open_files=40)
    assert len(mgr.logs()) == 300 and fs.open_handles <= 40


def test_unreadable_checkpoint_means_full_recovery() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr, "t", 0, 4)
    mgr.close()
    fs.write_file(f"{DIR}/recovery-point-offset-checkpoint", b"garbage")
    mgr = manager(fs, clock)
    log = mgr.get_log("t", 0)
    assert log is not None and log.log_end_offset == 4
    assert not mgr.had_clean_shutdown


def test_a_tick_looks_only_at_logs_with_housekeeping_to_do(monkeypatch: object) -> None:
    """Idle logs cost a tick nothing; an append, a roll or a retention check brings
    a log back into view, and its flush comes due as before."""
    import pytest

    from odradek.storage.local_log import LocalLog

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, retention_check_interval_ms=300_000)
    logs = [mgr.get_or_create_log("idle", i) for i in range(50)]
    looked: list[str] = []
    original = LocalLog.housekeeping_idle

    def counting(self: LocalLog) -> bool:
        looked.append(f"{self.topic}-{self.partition}")
        return original(self)

    monkeypatch.setattr(LocalLog, "housekeeping_idle", counting)
    mgr.tick()
    assert len(looked) == 50  # new logs are looked at once
    looked.clear()
    assert mgr.tick().jobs == [] and looked == []
    busy = mgr.get_or_create_log("busy", 0, LogConfig(flush_ms=1000, segment_bytes=400))
    looked.clear()
    mgr.tick()
    assert looked == ["busy-0"]
    looked.clear()
    busy.append(make_batch([b"x"]))
    tick = mgr.tick()
    assert looked == ["busy-0"] and tick.next_deadline_ms == clock.monotonic_ms() + 1000
    clock.advance(1000)
    (job,) = mgr.tick().jobs
    assert isinstance(job, FlushJob)
    job.run()
    job.complete()
    looked.clear()
    assert mgr.tick().jobs == [] and looked == ["busy-0"]  # seen once more after its flush
    looked.clear()
    assert mgr.tick().jobs == [] and looked == []
    logs[7].append(make_batch([b"x" * 300]))
    logs[7].append(make_batch([b"x" * 300]))  # rolls: the rolled segment's flush is due now
    (job,) = mgr.tick().jobs
    assert isinstance(job, FlushJob) and job.partition == ("idle", 7)
    job.run()
    job.complete()
    clock.advance(300_000)
    looked.clear()
    mgr.tick()
    assert len(looked) == 51  # a retention check walks every log

"""Several log directories: placement, start-up of every directory, refusals, and
the on-disk steps of a move between directories (odradek.storage.logdirs)."""

from __future__ import annotations

import pytest

from odradek.common import crashpoints
from odradek.common.clock import ManualClock
from odradek.replication.future import FutureReplica
from odradek.storage import LogConfig, LogManager, LogManagerConfig, MemoryFileSystem
from odradek.storage.checkpoint import read_offsets
from odradek.storage.log import Log
from odradek.storage.logdirs import LogDirsError
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
A, B, META = "/disk-a/kafka", "/disk-b/kafka", "/disk-m/meta"


def manager(fs: MemoryFileSystem, clock: ManualClock, *, pinned: bool = False) -> LogManager:
    mgr = LogManager(
        fs, clock, LogManagerConfig(log_dir=A, log_dirs=(A, B)),
        LogConfig(segment_bytes=600, file_delete_delay_ms=0),
        pinned={("__cluster_metadata", 0): META} if pinned else None)
    mgr.startup()
    return mgr


def fill(log: Log, n: int, tag: str = "x") -> None:
    for i in range(n):
        log.append(make_batch([f"{tag}{i}".encode() * 5]))
    log.advance_high_watermark(log.log_end_offset)


def values(log: Log) -> list[bytes]:
    """Every record value of the log, in offset order (kafka-python decodes)."""
    from kafka.record.default_records import DefaultRecordBatch

    data, out, pos = log.read_records(log.log_start_offset, 1 << 30), [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        out += [r.value for r in DefaultRecordBatch(data[pos:pos + size])]
        pos += size
    return out


def copy_all(future: FutureReplica, current: Log, fs: MemoryFileSystem) -> None:
    """The mover's rounds, on this thread, until the copy has caught up."""
    while (plan := future.plan(current, 500)) is not None:
        future.copy(plan, fs)
        future.copied(current)


def test_new_partitions_go_to_the_directory_with_the_fewest() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, pinned=True)
    mgr.get_or_create_log("__cluster_metadata", 0)  # pinned: counts nowhere
    parents = [mgr.get_or_create_log("t", p).parent_dir for p in range(4)]
    assert parents == [A, B, A, B]  # ties go to the first of log.dirs
    assert mgr.get_log("__cluster_metadata", 0).parent_dir == META  # type: ignore[union-attr]
    mgr.create_future_log("t", 1, A)  # a future log counts for its directory: A 3, B 2
    assert mgr.get_or_create_log("u", 0).parent_dir == B
    mgr.close()


def test_every_directory_has_its_own_checkpoints_and_marker_and_all_reopen() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock, pinned=True)
    for p, n in enumerate((4, 7, 2)):
        fill(mgr.get_or_create_log("t", p), n)
    mgr.get_or_create_log("__cluster_metadata", 0)
    mgr.close()
    for d in (A, B, META):
        assert fs.exists(f"{d}/.kafka_cleanshutdown")
    assert read_offsets(fs, f"{A}/recovery-point-offset-checkpoint") == {
        ("t", 0): 4, ("t", 2): 2}
    assert read_offsets(fs, f"{B}/recovery-point-offset-checkpoint") == {("t", 1): 7}
    assert read_offsets(fs, f"{META}/recovery-point-offset-checkpoint") == {
        ("__cluster_metadata", 0): 0}
    fs.crash()
    mgr = manager(fs, clock, pinned=True)
    assert mgr.had_clean_shutdown
    ends = {tp: (log.parent_dir, log.log_end_offset) for tp, log in mgr.logs().items()}
    assert ends == {("t", 0): (A, 4), ("t", 1): (B, 7), ("t", 2): (A, 2),
                    ("__cluster_metadata", 0): (META, 0)}
    mgr.close()


def test_a_partition_in_two_directories_refuses_to_start_naming_both() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr.get_or_create_log("t", 0), 2)
    mgr.close()
    fs.makedirs(f"{B}/t-0")
    with pytest.raises(LogDirsError) as err:
        manager(fs, clock)
    assert str(err.value).startswith(f"t-0 is in two log directories: {A}/t-0 and {B}/t-0")
    assert "\n" not in str(err.value)


def test_two_future_logs_of_one_partition_refuse_to_start() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    fill(mgr.get_or_create_log("t", 0), 2)
    mgr.create_future_log("t", 0, B)
    mgr.close()
    fs.makedirs(f"{A}/t-0.{'0' * 32}-future")
    with pytest.raises(LogDirsError, match="t-0 has two future logs"):
        manager(fs, clock)


def _moved(step: str | None, monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryFileSystem,
                                                                        ManualClock, list[bytes]]:
    """t-0 (synced) in A, copied into a future log in B, then promoted until ``step``
    (a crash point of promote_future; None: to the end), then a power cut."""
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    current = mgr.get_or_create_log("t", 0)
    assert current.parent_dir == A
    fill(current, 30)
    current.flush()
    future = FutureReplica(mgr.create_future_log("t", 0, B))
    copy_all(future, current, fs)
    assert future.finish(current, 1 << 20)
    future.sync(current.epochs.entries)
    expected = values(current)

    class Crash(Exception):
        pass

    def reach(point: str) -> None:
        if point == step:
            raise Crash(point)

    monkeypatch.setattr(crashpoints, "reach", reach)
    if step is None:
        mgr.promote_future("t", 0)
        mgr.write_checkpoints()
    else:
        with pytest.raises(Crash):
            mgr.promote_future("t", 0)
    fs.crash()
    return fs, clock, expected


@pytest.mark.parametrize(("step", "where"), [
    ("logdir.after_decide", B),  # A/t-0 renamed -delete: start-up renames the future in
    ("logdir.after_rename", B),
    (None, B),
])
def test_a_move_interrupted_at_any_step_completes_or_keeps_the_old_log(
        step: str | None, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fs, clock, expected = _moved(step, monkeypatch)
    monkeypatch.undo()
    mgr = manager(fs, clock)
    log = mgr.get_log("t", 0)
    assert log is not None and log.parent_dir == where and not log.local.is_future
    assert values(log) == expected
    assert not mgr.futures()
    assert sorted(n for n in fs.listdir(A) if n.startswith("t-")) == []  # -delete removed
    mgr.close()


def test_a_crash_while_copying_keeps_the_current_log_and_the_copy_resumes() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    current = mgr.get_or_create_log("t", 0)
    fill(current, 30)
    current.flush()
    future = FutureReplica(mgr.create_future_log("t", 0, B))
    plan = future.plan(current, 500)
    assert plan is not None
    future.copy(plan, fs)
    future.copied(current)
    future.log.flush()
    mgr.write_checkpoints()
    fs.crash()
    mgr = manager(fs, clock)
    current = mgr.get_log("t", 0)  # type: ignore[assignment]
    assert current.parent_dir == A and current.log_end_offset == 30
    resumed = mgr.future_log("t", 0)
    assert resumed is not None and resumed.parent_dir == B
    assert 0 < resumed.log_end_offset < 30  # the copy so far, kept
    future = FutureReplica(resumed)
    copy_all(future, current, fs)
    assert values(future.log) == values(current)
    mgr.close()


def test_the_copy_catches_up_with_appends_and_follows_the_log_start() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    current = mgr.get_or_create_log("t", 0)
    fill(current, 20, "a")
    future = FutureReplica(mgr.create_future_log("t", 0, B))
    plan = future.plan(current, 300)
    assert plan is not None
    future.copy(plan, fs)
    fill(current, 10, "b")  # appended while the copy runs
    future.copied(current)
    current.delete_records_before(5)
    copy_all(future, current, fs)
    assert future.finish(current, 1 << 20)
    assert future.log.log_end_offset == current.log_end_offset == 30
    assert future.log.log_start_offset == 5
    assert future.log.high_watermark == 30
    assert values(future.log)[-1] == b"b9" * 5


def test_a_rewrite_of_the_current_log_starts_the_copy_over() -> None:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    mgr = manager(fs, clock)
    current = mgr.get_or_create_log("t", 0)
    fill(current, 20, "a")
    future = FutureReplica(mgr.create_future_log("t", 0, B))
    copy_all(future, current, fs)
    current.truncate_to(12)  # a follower's truncation...
    fill(current, 8, "c")  # ...and other records at the same offsets
    plan = future.plan(current, 1 << 20)
    assert plan is not None and plan.restart_at == 0
    copy_all(future, current, fs)
    assert values(future.log) == values(current)
    assert values(future.log)[12] == b"c0" * 5

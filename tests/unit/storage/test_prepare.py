"""New partition directories made durable together (storage/prepare.py), and the
log manager opening them without writing their files again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from odradek.common.clock import ManualClock
from odradek.storage import LogConfig, LogManager, LogManagerConfig, MemoryFileSystem, batchsync
from odradek.storage.checkpoint import parse_partition_metadata
from odradek.storage.epochs import LeaderEpochCache, deferred_writes, parse_epochs
from odradek.storage.fs import makedirs_durable
from odradek.storage.prepare import MIN_BATCH, NewDir, prepare_dirs, prepare_pool
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
DIR = "/data"
POOL = prepare_pool()


class CountingFs(MemoryFileSystem):
    """Counts fsyncs and directory syncs."""

    syncs = 0

    def fsync(self, path: str) -> None:
        self.syncs += 1
        super().fsync(path)

    def sync_dir(self, path: str) -> None:
        self.syncs += 1
        super().sync_dir(path)


def manager(fs: MemoryFileSystem, *dirs: str) -> LogManager:
    mgr = LogManager(fs, ManualClock(NOW),
                     LogManagerConfig(log_dir=dirs[0] if dirs else DIR, log_dirs=dirs),
                     LogConfig())
    mgr.startup()
    return mgr


def test_prepared_directories_and_their_files_survive_a_crash() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    makedirs_durable(fs, DIR)
    ids = [uuid.uuid4() for _ in range(10)]
    new = [NewDir(f"{DIR}/t-{i}", ids[i], 5 if i % 2 == 0 else None) for i in range(10)]
    assert len(prepare_dirs(fs, new, POOL)) == 10
    fs.crash()  # only what was synced is left
    for i in range(10):
        assert parse_partition_metadata(fs.read_file(f"{DIR}/t-{i}/partition.metadata")) == ids[i]
        epochs = f"{DIR}/t-{i}/leader-epoch-checkpoint"
        if i % 2 == 0:
            assert parse_epochs(fs.read_file(epochs)) == [(5, 0)]
        else:
            assert not fs.exists(epochs)
        assert not fs.exists(f"{DIR}/t-{i}/partition.metadata.tmp")


def test_an_existing_directory_is_left_as_it_is() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    makedirs_durable(fs, f"{DIR}/t-0")
    assert prepare_dirs(fs, [NewDir(f"{DIR}/t-0", uuid.uuid4(), 1)], POOL) == set()
    assert fs.listdir(f"{DIR}/t-0") == []


def test_a_failed_directory_is_left_to_the_open_and_the_rest_are_made() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    makedirs_durable(fs, DIR)
    fs.fail_next_sync("t-3")
    new = [NewDir(f"{DIR}/t-{i}", uuid.uuid4()) for i in range(8)]
    assert len(prepare_dirs(fs, new, POOL)) == 7
    fs.crash()
    # The log directory was synced after all of them, t-3's entry too.
    assert sorted(fs.listdir(DIR)) == sorted(f"t-{i}" for i in range(8))


def test_the_manager_opens_prepared_logs_with_no_sync_and_their_first_epoch() -> None:
    fs = CountingFs(ManualClock(NOW))
    mgr = manager(fs)
    topic_id = uuid.uuid4()
    new = [(("orders", p), topic_id, 7 if p < 6 else None) for p in range(12)]
    assert mgr.prepare_new_logs(new) == 12
    before = fs.syncs
    logs = [mgr.get_or_create_log("orders", p, topic_id=topic_id) for p in range(12)]
    assert fs.syncs == before  # the directory and both files were already durable
    for p, lg in enumerate(logs):
        assert lg.dir_path == f"{DIR}/orders-{p}"
        assert lg.topic_id == topic_id
        assert lg.epochs.entries == ([(7, 0)] if p < 6 else [])
    logs[0].append(make_batch([b"x"]))
    logs[0].flush()
    mgr.close()
    fs.crash()
    mgr = manager(fs)
    assert mgr.get_log("orders", 0) is not None
    assert mgr.get_log("orders", 0).log_end_offset == 1  # type: ignore[union-attr]
    assert mgr.get_log("orders", 0).epochs.entries == [(7, 0)]  # type: ignore[union-attr]


def test_a_few_new_logs_are_left_to_the_open() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    new = [(("orders", p), uuid.uuid4(), None) for p in range(MIN_BATCH - 1)]
    assert mgr.prepare_new_logs(new) == 0
    assert not fs.exists(f"{DIR}/orders-0")


def test_with_several_log_dirs_the_open_uses_the_prepared_directory() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs, "/a", "/b")
    for p in range(3):  # /a holds 2 and /b 1 before the batch
        mgr.get_or_create_log("old", p)
    new = [(("orders", p), uuid.uuid4(), None) for p in range(9)]
    assert mgr.prepare_new_logs(new) == 9
    placed = [mgr.get_or_create_log("orders", p).parent_dir for p in range(9)]
    assert sorted(fs.listdir("/a") + fs.listdir("/b")) == sorted(
        [f"old-{p}" for p in range(3)] + [f"orders-{p}" for p in range(9)])
    assert {d: placed.count(d) for d in ("/a", "/b")} == {"/a": 4, "/b": 5}


def test_an_empty_epoch_rebuild_writes_no_file_but_a_damaged_one_is_replaced() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    makedirs_durable(fs, f"{DIR}/t-0")
    cache = LeaderEpochCache(fs, f"{DIR}/t-0")
    cache.load()
    cache.rebuild_from([])
    assert cache.loaded and not fs.exists(cache.path)
    fs.write_file(cache.path, b"not a checkpoint")
    cache = LeaderEpochCache(fs, f"{DIR}/t-0")
    cache.load()
    assert not cache.loaded
    cache.rebuild_from([])
    assert parse_epochs(fs.read_file(cache.path)) == []


def epochs_changed(mgr: LogManager, n: int) -> list[LeaderEpochCache]:
    """The caches of ``n`` new logs whose epoch 4 was assigned in a deferred block."""
    logs = [mgr.get_or_create_log("orders", p) for p in range(n)]
    with deferred_writes() as pending:
        for lg in logs:
            lg.epochs.assign(4, 0)
    return list(pending.values())


def test_epoch_writes_deferred_in_a_block_are_durable_after_write_epochs() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    logs = [mgr.get_or_create_log("orders", p) for p in range(10)]
    with deferred_writes() as pending:
        for lg in logs:
            lg.epochs.assign(3, 0)
        assert len(pending) == 10
        assert not any(fs.exists(lg.epochs.path) for lg in logs)  # nothing written yet
    mgr.write_epochs(list(pending.values()))
    fs.crash()
    assert all(parse_epochs(fs.read_file(lg.epochs.path)) == [(3, 0)] for lg in logs)


def test_outside_a_block_an_epoch_is_written_at_once() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    lg = manager(fs).get_or_create_log("orders", 0)
    lg.epochs.assign(2, 0)
    fs.crash()
    assert parse_epochs(fs.read_file(lg.epochs.path)) == [(2, 0)]


def test_a_deferred_epoch_write_that_fails_takes_its_log_offline_only() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    caches = epochs_changed(mgr, 10)
    fs.fail_next_sync("orders-4/leader-epoch-checkpoint")
    mgr.write_epochs(caches)
    assert [mgr.logs()[("orders", p)].offline for p in range(10)] == [p == 4 for p in range(10)]


def test_a_deferred_epoch_write_of_a_deleted_log_is_skipped() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    lg = mgr.get_or_create_log("orders", 0)
    with deferred_writes() as pending:
        lg.epochs.assign(1, 0)
    mgr.delete_log("orders", 0)
    mgr.write_epochs(list(pending.values()))
    assert not lg.offline and not fs.exists(f"{DIR}/orders-0")


def test_many_epoch_files_take_two_file_system_syncs_when_little_is_dirty() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    mgr.dirty_bytes = lambda: 0
    caches = epochs_changed(mgr, batchsync.MIN_FILES)
    before = fs.syncs
    mgr.write_epochs(caches)
    assert fs.syncs - before == 2
    fs.crash()
    assert all(parse_epochs(fs.read_file(c.path)) == [(4, 0)] for c in caches)
    assert not any(name.endswith(".tmp") for name in fs.walk_files())


def test_with_many_dirty_pages_the_epoch_files_are_synced_one_by_one() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    mgr.dirty_bytes = lambda: (batchsync.DIRTY_BASE
                             + batchsync.DIRTY_PER_FILE * batchsync.MIN_FILES + 1)
    caches = epochs_changed(mgr, batchsync.MIN_FILES)
    before = fs.syncs
    mgr.write_epochs(caches)
    assert fs.syncs - before == 2 * len(caches)  # the file, then its directory
    fs.crash()
    assert all(parse_epochs(fs.read_file(c.path)) == [(4, 0)] for c in caches)


def test_a_failed_file_system_sync_falls_back_to_one_file_at_a_time() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    mgr.dirty_bytes = lambda: 0
    caches = epochs_changed(mgr, batchsync.MIN_FILES)
    fs.fail_next_sync(DIR)  # the first sync_all (of the log directory's file system)
    mgr.write_epochs(caches)
    fs.crash()
    assert all(parse_epochs(fs.read_file(c.path)) == [(4, 0)] for c in caches)
    assert not any(lg.offline for lg in mgr.logs().values())


def test_dirty_bytes_adds_dirty_and_writeback(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nDirty:  12 kB\nWriteback: 3 kB\nWritebackTmp: 9 kB\n")
    assert batchsync.dirty_bytes(str(meminfo)) == 15 * 1024
    assert batchsync.dirty_bytes(str(tmp_path / "missing")) is None
    assert batchsync.worth_it(batchsync.MIN_FILES, 0)
    assert not batchsync.worth_it(batchsync.MIN_FILES - 1, 0)
    assert not batchsync.worth_it(batchsync.MIN_FILES, None)
    assert batchsync.worth_it(10_000, batchsync.DIRTY_BASE + 10_000 * batchsync.DIRTY_PER_FILE)
    assert not batchsync.worth_it(100, batchsync.DIRTY_BASE + 101 * batchsync.DIRTY_PER_FILE)


def test_a_new_leaders_epoch_is_noted_and_written_by_its_first_append() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    lg = manager(fs).get_or_create_log("orders", 0)
    lg.append(make_batch([b"a"]), leader_epoch=2)
    assert parse_epochs(fs.read_file(lg.epochs.path)) == [(2, 0)]
    lg.assign_epoch(5, lg.log_end_offset)  # elected again: noted, not written
    assert lg.epochs.entries == [(2, 0), (5, 1)]
    assert lg.epochs.end_offset_for(2, lg.log_end_offset) == (2, 1)  # answered from memory
    assert parse_epochs(fs.read_file(lg.epochs.path)) == [(2, 0)]
    lg.append(make_batch([b"b"]), leader_epoch=5)
    fs.crash()  # the epoch file is durable once the first append in the epoch is made
    assert parse_epochs(fs.read_file(lg.epochs.path)) == [(2, 0), (5, 1)]


def test_an_epoch_noted_with_no_append_before_a_crash_is_missing_after_it() -> None:
    fs = MemoryFileSystem(ManualClock(NOW))
    mgr = manager(fs)
    lg = mgr.get_or_create_log("orders", 0)
    lg.append(make_batch([b"a"]), leader_epoch=2)
    lg.flush()
    lg.assign_epoch(5, 1)
    fs.crash()
    again = manager(fs).get_log("orders", 0)
    assert again is not None and again.log_end_offset == 1
    assert again.epochs.entries == [(2, 0)]


def test_a_task_started_inside_a_block_writes_at_once_after_it() -> None:
    """A fetcher task created by a leadership change inside reconcile's block runs
    after it: its epoch writes are made at once, not collected for nobody."""
    fs = MemoryFileSystem(ManualClock(NOW))
    lg = manager(fs).get_or_create_log("orders", 0)

    async def main() -> dict[int, LeaderEpochCache]:
        async def later() -> None:
            await asyncio.sleep(0)
            lg.epochs.assign(7, 0)

        with deferred_writes() as pending:
            task = asyncio.get_running_loop().create_task(later())
        await task
        return pending

    assert asyncio.run(main()) == {}
    fs.crash()
    assert parse_epochs(fs.read_file(lg.epochs.path)) == [(7, 0)]

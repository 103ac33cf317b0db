"""Crash and recovery: cut segments, flipped bytes, deleted or damaged indexes,
failed and torn writes and syncs, power cuts.

The claim under test: after an unclean stop, recovery keeps every batch that was
complete and valid up to the first damage, loses nothing below the recovery
point, and never serves a corrupt batch (every byte read back validates, with
contiguous offsets). Real-file tests simulate ``kill -9`` by dropping the
process's handles without closing the log (page cache survives, nothing of the
in-memory state does) and then damage the files with real truncation.
"""

from __future__ import annotations

import errno
import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import (
    KafkaStorageError,
    Log,
    LogConfig,
    MemoryFileSystem,
    OsFileSystem,
)
from odradek.storage.fs import FileSystem
from odradek.wire.batch import iter_batches
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100, file_delete_delay_ms=0)


@dataclass(frozen=True)
class Stored:
    base: int
    last: int
    segment: int
    position: int
    data: bytes


def fill(log: Log, clock: ManualClock, rng: random.Random, batches: int) -> None:
    for _ in range(batches):
        n = rng.randint(1, 4)
        log.append(
            make_batch(
                [rng.randbytes(rng.randint(0, 90)) for _ in range(n)], timestamps=clock.now_ms()
            )
        )
        clock.advance(rng.randint(0, 50))


def layout(log: Log) -> list[Stored]:
    out = []
    for seg in log.segments:
        data = log.fs.read_file(seg.log_path)
        for pos, h in iter_batches(data):
            out.append(
                Stored(h.base_offset, h.last_offset, seg.base_offset, pos, data[pos : pos + h.size])
            )
    return out


def assert_serves_only_valid_prefix(
    log: Log, expected: list[Stored], *, gaps: bool = False
) -> None:
    """The log holds exactly ``expected`` (a prefix of what was written, or with
    ``gaps`` what was written less the damaged batches) and every read, from
    every offset, returns valid batches with increasing (without ``gaps``,
    contiguous) offsets."""
    assert log.log_end_offset == (expected[-1].last + 1 if expected else log.log_start_offset)
    everything = log.read_records(log.log_start_offset, 1 << 30)
    batches = iter_batches(everything)  # raises on any corrupt batch
    assert [everything[p : p + h.size] for p, h in batches] == [s.data for s in expected]
    expect = log.log_start_offset
    for _, h in batches:
        assert h.base_offset >= expect if gaps else h.base_offset == expect
        expect = h.next_offset
    for s in expected:
        for offset in (s.base, s.last):
            assert log.read_records(offset, 1)[: len(s.data)] == s.data


def build(fs: FileSystem, path: str, seed: int) -> tuple[Log, ManualClock, list[Stored], int]:
    """A log of several segments; flushed part-way; returns the layout and the
    recovery point."""
    rng = random.Random(seed)
    clock = ManualClock(NOW)
    log = Log.open(fs, path, CONFIG, clock)
    fill(log, clock, rng, rng.randint(10, 40))
    log.flush()
    fill(log, clock, rng, rng.randint(1, 25))
    return log, clock, layout(log), log.recovery_point


def kill(log: Log) -> None:
    """kill -9: the process's descriptors go away; the page cache stays."""
    log.handles.close_all()


def reopen(
    fs: FileSystem, path: str, clock: ManualClock, recovery_point: int, *,
    skip_damage: bool = False,
) -> Log:
    """Reopen after a crash; Kafka's way (cut at the first damage) unless ``skip_damage``."""
    return Log.open(fs, path, CONFIG, clock, recovery_point=recovery_point,
                    skip_damage=skip_damage)


SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_cut_active_segment_at_random_positions(tmp_path: Path, seed: int) -> None:
    fs = OsFileSystem()
    path = str(tmp_path / "t-0")
    log, clock, before, rp = build(fs, path, seed)
    kill(log)
    rng = random.Random(seed)
    active = before[-1].segment
    log_file = f"{path}/{active:020d}.log"
    cut = rng.randint(0, os.path.getsize(log_file))
    os.truncate(log_file, cut)
    log = reopen(fs, path, clock, rp)
    expected = [s for s in before if s.segment < active or s.position + len(s.data) <= cut]
    assert_serves_only_valid_prefix(log, expected)
    rp_position = min(
        (s.position for s in before if s.segment == active and s.base >= rp), default=cut
    )
    if cut >= rp_position:
        assert log.log_end_offset >= rp, "lost data below the recovery point"


@pytest.mark.parametrize("skip_damage", [False, True], ids=["truncate", "skip"])
@pytest.mark.parametrize("seed", SEEDS)
def test_flip_random_bytes_after_the_recovery_point(
    tmp_path: Path, seed: int, skip_damage: bool
) -> None:
    fs = OsFileSystem()
    path = str(tmp_path / "t-0")
    log, clock, before, rp = build(fs, path, seed)
    kill(log)
    rng = random.Random(seed)
    unflushed = [s for s in before if s.base >= rp]
    if not unflushed:
        pytest.skip("nothing unflushed in this seed")
    victim = rng.choice(unflushed)
    offset_in_batch = rng.choice([i for i in range(len(victim.data)) if not 12 <= i < 16])
    # (partitionLeaderEpoch, bytes 12-15, is outside the CRC in Kafka's format too:
    # no reader can tell a flipped epoch from a real one, so it is not flipped here.)
    log_file = f"{path}/{victim.segment:020d}.log"
    with open(log_file, "r+b") as f:
        f.seek(victim.position + offset_in_batch)
        byte = f.read(1)[0]
        f.seek(victim.position + offset_in_batch)
        f.write(bytes([byte ^ (1 << rng.randint(0, 7))]))
    log = reopen(fs, path, clock, rp, skip_damage=skip_damage)
    if skip_damage and victim.segment != before[-1].segment:
        # Only the damaged batch is lost; every later one is kept.
        expected = [s for s in before if s is not victim]
        assert [(d.first_offset, d.next_offset) for d in log.load_report.damage] == [
            (victim.base, victim.last + 1)]
        assert_serves_only_valid_prefix(log, expected, gaps=True)
    else:
        expected = [s for s in before if s.base < victim.base]
        assert_serves_only_valid_prefix(log, expected)
    assert log.log_end_offset >= min(rp, victim.base)


@pytest.mark.parametrize("seed", SEEDS)
def test_deleted_or_damaged_indexes_are_rebuilt(tmp_path: Path, seed: int) -> None:
    """Indexes deleted, flipped, extended with garbage or cut. After an unclean stop
    with recovery point 0 every index is rebuilt, so any damage goes. Indexes below
    the recovery point are trusted (they were fsynced): damage there is bit rot,
    caught when an entry is checked against its batch; a cut exactly at an entry
    boundary cannot be told from a shorter index, so it is cut elsewhere here."""
    fs = OsFileSystem()
    path = str(tmp_path / "t-0")
    log, clock, before, _rp = build(fs, path, seed)
    log.flush()
    times = {ts: log.list_offsets(ts) for ts in range(NOW - 1, clock.now_ms() + 2, 7)}
    rng = random.Random(seed + 1000)
    mode = rng.choice(["clean", "kill, recover all", "kill, trust flushed"])
    if mode == "clean":
        log.close()
    else:
        kill(log)
    recovery_point = 0 if mode == "kill, recover all" else log.log_end_offset
    for name in sorted(os.listdir(path)):
        if not name.endswith((".index", ".timeindex")):
            continue
        full = f"{path}/{name}"
        size = os.path.getsize(full)
        entry = 8 if name.endswith(".index") else 12
        action = rng.choice(["keep", "delete", "flip", "garbage", "truncate"])
        if action == "delete":
            os.remove(full)
        elif action == "flip" and size:
            data = bytearray(Path(full).read_bytes())
            data[rng.randrange(len(data))] ^= 1 << rng.randint(0, 7)
            Path(full).write_bytes(bytes(data))
        elif action == "garbage":
            with open(full, "ab") as f:
                f.write(rng.randbytes(rng.randint(1, 30)))
        elif action == "truncate" and size:
            cut = rng.randint(0, size - 1)
            if recovery_point and cut % entry == 0:
                cut += 1
            os.truncate(full, cut)
    log = Log.open(
        fs, path, CONFIG, clock, clean_shutdown=mode == "clean", recovery_point=recovery_point
    )
    assert_serves_only_valid_prefix(log, before)
    for ts, result in times.items():
        assert log.list_offsets(ts) == result, (mode, ts)


def test_rebuilt_offset_index_equals_the_original(tmp_path: Path) -> None:
    fs = OsFileSystem()
    path = str(tmp_path / "t-0")
    log, clock, _, _ = build(fs, path, 7)
    log.flush()
    log.close()
    originals = {n: Path(path, n).read_bytes() for n in os.listdir(path) if n.endswith(".index")}
    for name in originals:
        os.remove(f"{path}/{name}")
    log = Log.open(fs, path, CONFIG, clock, recovery_point=0)
    log.flush()
    log.close()
    for name, data in originals.items():
        assert Path(path, name).read_bytes() == data, name


@pytest.mark.parametrize("seed", range(40))
def test_power_cut_keeps_everything_synced(seed: int) -> None:
    """MemoryFileSystem power cut: unsynced tails torn at random, garbage appended."""
    fs = MemoryFileSystem()
    fs.makedirs("/d")
    fs.sync_dir("/")
    log, clock, before, _ = build(fs, "/d/t-0", seed)
    rp = log.recovery_point
    fs.crash(random.Random(seed), garbage=True)
    log = reopen(fs, "/d/t-0", clock, rp)
    assert log.log_end_offset >= rp
    kept = [s for s in before if s.last < log.log_end_offset]
    assert_serves_only_valid_prefix(log, kept)


def test_failed_write_takes_the_log_offline_and_recovery_repairs(tmp_path: Path) -> None:
    fs = MemoryFileSystem()
    log, clock, before, _ = build(fs, "/d/t-0", 3)
    log.flush()
    fs.fail_next_write(".log", keep_bytes=30, err=errno.EIO)
    with pytest.raises(KafkaStorageError) as e:
        log.append(make_batch([b"lost"], timestamps=clock.now_ms()))
    assert e.value.error_code == 56
    assert log.offline
    with pytest.raises(KafkaStorageError):
        log.append(make_batch([b"later"]))
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    log = reopen(fs, "/d/t-0", clock, log.recovery_point)
    assert_serves_only_valid_prefix(log, before)
    log.append(make_batch([b"again"], timestamps=clock.now_ms()))


def test_partial_write_then_power_cut(tmp_path: Path) -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/d")
    fs.sync_dir("/")
    log, clock, before, _ = build(fs, "/d/t-0", 4)
    log.flush()
    rp = log.recovery_point
    fs.fail_next_write(".log", keep_bytes=61, err=errno.EIO)
    with pytest.raises(KafkaStorageError):
        log.append(make_batch([b"x" * 50], timestamps=clock.now_ms()))
    fs.crash(random.Random(4))
    log = reopen(fs, "/d/t-0", clock, rp)
    assert_serves_only_valid_prefix(log, before)


def test_failed_fsync_keeps_the_recovery_point_and_goes_offline() -> None:
    fs = MemoryFileSystem()
    fs.makedirs("/d")
    fs.sync_dir("/")
    log, clock, before, _ = build(fs, "/d/t-0", 5)
    rp = log.recovery_point
    fs.fail_next_sync(".log")
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.recovery_point == rp and log.offline
    fs.crash()
    log = reopen(fs, "/d/t-0", clock, rp)
    assert log.log_end_offset >= rp
    assert_serves_only_valid_prefix(log, [s for s in before if s.last < log.log_end_offset])


def test_flush_job_runs_elsewhere_and_group_commits() -> None:
    fs = MemoryFileSystem()
    clock = ManualClock(NOW)
    log = Log.open(fs, "/d/t-0", LogConfig(flush_messages=3), clock)
    assert not log.append(make_batch([b"a"])).flush_due
    assert log.append(make_batch([b"b", b"c"])).flush_due
    job = log.begin_flush()
    assert job is not None and job.up_to_offset == 3
    assert log.begin_flush() is None  # one at a time
    # Appends while the fsync runs: that fsync does not cover them, so from the
    # third one on (flush.messages=3) their answers must wait for the next one.
    assert [log.append(make_batch([b"d"])).flush_due for _ in range(5)] == [
        False, False, True, True, True]
    assert not log.flush_due()  # in flight: no second flush starts meanwhile
    syncs = fs.syncs
    job.run()
    job.complete()
    assert fs.syncs > syncs
    assert log.recovery_point == 3
    assert log.flush_due()  # five more records waiting: the next fsync covers all of them
    log.flush()
    assert log.recovery_point == 8


def test_with_flush_messages_1_every_append_waits_even_while_an_fsync_runs() -> None:
    """docs/durability.md: flush.messages=1 means every acknowledged batch is fsynced.
    An append made while the fsync of an earlier one runs was answered without
    waiting for any fsync (seen in the chaos harness: with a slow disk, acks kept
    coming every 0.1 s while each fsync took a second)."""
    log = Log.open(MemoryFileSystem(), "/d/t-0", LogConfig(flush_messages=1), ManualClock(NOW))
    assert log.append(make_batch([b"a"])).flush_due
    job = log.begin_flush()
    assert job is not None
    assert log.append(make_batch([b"b"])).flush_due
    job.run()
    job.complete()
    assert log.recovery_point == 1 and log.begin_flush() is not None


def test_truncation_during_a_flush_caps_the_recovery_point() -> None:
    fs = MemoryFileSystem()
    clock = ManualClock(NOW)
    log = Log.open(fs, "/d/t-0", LogConfig(), clock)
    for _ in range(6):
        log.append(make_batch([b"x"]))
    job = log.begin_flush()
    assert job is not None
    log.truncate_to(2)
    log.append(make_batch([b"new"]))
    job.run()
    job.complete()
    assert log.recovery_point <= 2


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT])
@pytest.mark.parametrize("seed", range(5))
def test_full_disk_keeps_reads_and_appends_resume_when_space_returns(
    seed: int, err: int
) -> None:
    """A write that fails for lack of space is cut back to the last whole batch;
    the log stays online, reads go on, and the next append once space is back
    gets the next offset. Recovery then sees every acknowledged batch once."""
    fs = MemoryFileSystem()
    log, clock, before, _ = build(fs, "/d/t-0", seed)
    leo = log.log_end_offset
    rng = random.Random(seed)
    for _ in range(3):  # the disk stays full for a while
        fs.fail_next_write(".log", keep_bytes=rng.randint(0, 80), err=err)
        with pytest.raises(KafkaStorageError) as e:
            log.append(make_batch([b"no room"] * rng.randint(1, 3), timestamps=clock.now_ms()))
        assert e.value.error_code == 56 and "no space left" in str(e.value)
        assert not log.offline and log.log_end_offset == leo
        assert_serves_only_valid_prefix(log, before)
    info = log.append(make_batch([b"room again"], timestamps=clock.now_ms()))
    assert info.first_offset == leo
    after = layout(log)
    assert after[:-1] == before and len(after) == len(before) + 1
    kill(log)
    log = reopen(fs, "/d/t-0", clock, 0)
    assert_serves_only_valid_prefix(log, after)


def test_full_disk_during_roll_keeps_the_log_online() -> None:
    fs = MemoryFileSystem()
    log, clock, before, _ = build(fs, "/d/t-0", 9)
    log.flush()
    fs.fail_next_write(".index", err=errno.ENOSPC)  # the old segment's index on roll
    with pytest.raises(KafkaStorageError):
        log.roll()
    assert not log.offline
    assert_serves_only_valid_prefix(log, before)
    info = log.append(make_batch([b"later"], timestamps=clock.now_ms()))
    assert info.first_offset == before[-1].last + 1

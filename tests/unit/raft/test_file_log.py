"""FileRaftLog: MemoryRaftLog's semantics, on disk, surviving crashes."""

from __future__ import annotations

import copy
import posixpath
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from odradek.raft.file_log import LOG_FILE, FileRaftLog, RaftLogError, snapshot_file_name
from odradek.raft.log import Entry, LogError, MemoryRaftLog, Snapshot
from odradek.storage.fs import OsFileSystem
from odradek.storage.memfs import MemoryFileSystem
from odradek.wire.batch import iter_batches
from odradek.wire.records import decode_batch

DIR = "/data/__cluster_metadata-0"
LOG = posixpath.join(DIR, LOG_FILE)


def _same(file_log: FileRaftLog, mem: MemoryRaftLog) -> None:
    assert file_log.entries() == mem.entries()
    assert file_log.snapshot() == mem.snapshot()
    assert (file_log.start_offset, file_log.end_offset, file_log.flushed_offset,
            file_log.last_epoch) == (mem.start_offset, mem.end_offset, mem.flushed_offset,
                                     mem.last_epoch)


def _outcome(fn: Callable[..., object], *args: object) -> object:
    """What a call did: its result, or that it raised LogError (both logs must agree)."""
    try:
        return ("ok", fn(*args))
    except LogError:
        return ("LogError",)


class SideBySide(RuleBasedStateMachine):
    """FileRaftLog on a MemoryFileSystem against MemoryRaftLog, every observable."""

    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem()
        self.file = FileRaftLog(self.fs, DIR)
        self.mem = MemoryRaftLog()

    @rule(sizes=st.lists(st.integers(1, 3), min_size=1, max_size=4),
          bumps=st.lists(st.integers(0, 2), min_size=4, max_size=4),
          control=st.lists(st.booleans(), min_size=4, max_size=4),
          fault=st.sampled_from([None, None, None, "offset", "epoch", "empty"]))
    def append(self, sizes: list[int], bumps: list[int], control: list[bool],
               fault: str | None) -> None:
        offset, epoch = self.mem.end_offset, self.mem.last_epoch
        entries = []
        for k, size in enumerate(sizes):
            epoch += bumps[k]
            records = tuple(f"{offset + j}@{epoch}".encode() * (j + 1) for j in range(size))
            entries.append(Entry(offset, epoch, records, control[k]))
            offset += size
        if fault == "offset":
            last = entries[-1]
            entries[-1] = Entry(last.offset + 1, last.epoch, last.records)
        elif fault == "epoch" and entries[-1].epoch > 0:
            last = entries[-1]
            entries[-1] = Entry(last.offset, -1, last.records)
        elif fault == "empty":
            entries[-1] = Entry(entries[-1].offset, entries[-1].epoch, ())
        assert _outcome(self.file.append, entries) == _outcome(self.mem.append, entries)

    @rule(delta=st.integers(-4, 2))
    def truncate(self, delta: int) -> None:
        offset = self.mem.end_offset + delta
        assert self.file.truncate_to(offset) == self.mem.truncate_to(offset)

    @rule()
    def flush(self) -> None:
        self.file.flush()
        self.mem.flush()

    @rule(pick=st.integers(0, 10), exact=st.booleans(), payload=st.binary(max_size=20))
    def take_snapshot(self, pick: int, exact: bool, payload: bytes) -> None:
        entries = self.mem.entries()
        if exact and entries:
            offset = entries[pick % len(entries)].end
        else:
            offset = self.mem.start_offset + pick
        assert (_outcome(self.file.take_snapshot, offset, payload)
                == _outcome(self.mem.take_snapshot, offset, payload))

    @rule(delta=st.integers(-3, 6), bump=st.integers(0, 2), payload=st.binary(max_size=20))
    def install_snapshot(self, delta: int, bump: int, payload: bytes) -> None:
        snap = Snapshot(max(0, self.mem.end_offset + delta), self.mem.last_epoch + bump, payload)
        self.file.install_snapshot(snap)
        self.mem.install_snapshot(snap)

    @rule(delta=st.integers(-2, 12), count=st.integers(0, 5))
    def read(self, delta: int, count: int) -> None:
        offset = self.mem.start_offset + delta
        assert self.file.read(offset, count) == self.mem.read(offset, count)
        assert self.file.entry_at(offset) == self.mem.entry_at(offset)

    @rule(epoch=st.integers(-1, 12))
    def end_offset_for_epoch(self, epoch: int) -> None:
        assert self.file.end_offset_for_epoch(epoch) == self.mem.end_offset_for_epoch(epoch)

    @rule()
    def reopen(self) -> None:
        """A restart without a power cut: everything written is loaded, and flushed."""
        self.file.close()
        self.file = FileRaftLog(self.fs, DIR)
        self.mem.flush()

    @rule(seed=st.integers(0, 2**32), garbage=st.booleans())
    def crash(self, seed: int, garbage: bool) -> None:
        self.fs.crash(random.Random(seed), garbage=garbage)
        self.file = FileRaftLog(self.fs, DIR)
        got, wrote = self.file.entries(), self.mem.entries()
        assert got == wrote[: len(got)]
        assert self.file.end_offset >= self.mem.flushed_offset
        assert self.file.snapshot() == self.mem.snapshot()
        self.mem.truncate_to(self.file.end_offset)
        self.mem.flush()

    @invariant()
    def observables_agree(self) -> None:
        _same(self.file, self.mem)


TestSideBySide = SideBySide.TestCase


# -- crashes --------------------------------------------------------------------------


def _entry(offset: int, epoch: int, n: int = 1, control: bool = False) -> Entry:
    return Entry(offset, epoch, tuple(f"r{offset + k}".encode() for k in range(n)), control)


def _random_history(rng: random.Random, fs: MemoryFileSystem) -> tuple[FileRaftLog, MemoryRaftLog]:
    file_log, mem = FileRaftLog(fs, DIR), MemoryRaftLog()
    epoch = 1
    for _ in range(rng.randint(1, 40)):
        roll = rng.random()
        if roll < 0.6:
            batch = []
            offset = mem.end_offset
            for _ in range(rng.randint(1, 3)):
                epoch += rng.random() < 0.15
                entry = _entry(offset, epoch, rng.randint(1, 4), rng.random() < 0.1)
                batch.append(entry)
                offset = entry.end
            file_log.append(batch)
            mem.append(batch)
        elif roll < 0.8:
            file_log.flush()
            mem.flush()
        elif roll < 0.9 and mem.entries():
            offset = rng.randint(mem.start_offset, mem.end_offset)
            file_log.truncate_to(offset)
            mem.truncate_to(offset)
        elif mem.entries():
            end = rng.choice(mem.entries()).end
            file_log.take_snapshot(end, b"image@%d" % end)
            mem.take_snapshot(end, b"image@%d" % end)
        _same(file_log, mem)
    return file_log, mem


@pytest.mark.parametrize("garbage", [False, True])
def test_a_crash_keeps_every_flushed_entry_and_a_prefix_of_the_rest(garbage: bool) -> None:
    torn = 0
    for seed in range(300):
        rng = random.Random(seed)
        fs = MemoryFileSystem()
        _, mem = _random_history(rng, fs)
        fs.crash(random.Random(seed), garbage=garbage)
        got = FileRaftLog(fs, DIR)
        entries, wrote = got.entries(), mem.entries()
        assert entries == wrote[: len(entries)], seed
        assert got.end_offset >= mem.flushed_offset, seed
        assert got.snapshot() == mem.snapshot(), seed
        assert got.flushed_offset == got.end_offset
        torn += got.end_offset < mem.end_offset
        # Recovery cut the torn tail for good: a second crash changes nothing.
        fs.crash(random.Random(seed + 1), garbage=garbage)
        again = FileRaftLog(fs, DIR)
        assert again.entries() == entries and again.snapshot() == got.snapshot(), seed
    assert torn > 50  # the seeds do exercise torn tails


def test_a_truncation_below_the_flushed_point_does_not_come_back_after_a_crash() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 1, 2)])
    log.flush()
    log.truncate_to(2)
    log.append([_entry(2, 2, 3)])  # a new leader's entry, not flushed
    fs.crash(random.Random(7))
    got = FileRaftLog(fs, DIR)
    assert got.entries() in ([_entry(0, 1, 2)], [_entry(0, 1, 2), _entry(2, 2, 3)])


def test_a_crash_while_taking_a_snapshot_before_the_log_is_rewritten() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 2, 2)])
    log.flush()
    fs.fail_next_write(LOG_FILE + ".tmp")
    with pytest.raises(OSError):
        log.take_snapshot(4, b"image")
    fs.crash(random.Random(1))
    got = FileRaftLog(fs, DIR)
    assert got.snapshot() == Snapshot(4, 1, b"image")
    assert got.entries() == [_entry(4, 2, 2)]
    assert not any(name.endswith(".tmp") for name in fs.listdir(DIR))


def test_a_snapshot_over_unflushed_entries_then_a_crash_before_the_rewrite() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2)])
    log.flush()
    log.append([_entry(2, 1, 2), _entry(4, 1, 2)])
    fs.fail_next_write(LOG_FILE + ".tmp")
    with pytest.raises(OSError):
        log.take_snapshot(4, b"image")
    fs.crash()  # the unflushed entries are gone, the snapshot is not
    got = FileRaftLog(fs, DIR)
    assert got.snapshot() == Snapshot(4, 1, b"image")
    assert (got.start_offset, got.end_offset, got.entries()) == (4, 4, [])


@pytest.mark.parametrize("agrees", [True, False])
def test_a_crash_while_installing_a_snapshot_before_the_log_is_emptied(agrees: bool) -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 2, 2)])
    log.flush()
    snap = Snapshot(4, 1 if agrees else 3, b"leader's image")
    fs.fail_next_sync(LOG_FILE)
    with pytest.raises(OSError):
        log.install_snapshot(snap)
    fs.crash()
    got = FileRaftLog(fs, DIR)
    assert got.snapshot() == snap
    # A log that agrees with the snapshot keeps what follows it; one that does not is dropped.
    assert got.entries() == ([_entry(4, 2, 2)] if agrees else [])
    assert got.last_epoch >= snap.epoch


def test_only_the_newest_snapshot_is_kept() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 2, 2)])
    log.take_snapshot(2, b"a")
    log.take_snapshot(4, b"b")
    assert sorted(fs.listdir(DIR)) == [LOG_FILE, snapshot_file_name(4, 1)]
    log.install_snapshot(Snapshot(9, 3, b"c"))
    assert sorted(fs.listdir(DIR)) == [LOG_FILE, snapshot_file_name(9, 3)]
    assert fs.size(LOG) == 0


# -- real files ---------------------------------------------------------------------------


def test_reopen_on_real_files(tmp_path: Path) -> None:
    directory = str(tmp_path / "__cluster_metadata-0")
    log = FileRaftLog(OsFileSystem(), directory)
    log.append([_entry(0, 1, 1, control=True), _entry(1, 1, 3), _entry(4, 2, 1, control=True)])
    log.flush()
    log.take_snapshot(1, b"image")
    log.append([_entry(5, 2, 2)])
    expected = log.entries()
    log.close()
    again = FileRaftLog(OsFileSystem(), directory)
    assert again.entries() == expected
    assert again.snapshot() == Snapshot(1, 1, b"image")
    assert (again.start_offset, again.end_offset, again.flushed_offset) == (1, 7, 7)
    assert sorted(p.name for p in (tmp_path / "__cluster_metadata-0").iterdir()) == [
        LOG_FILE, snapshot_file_name(1, 1)]
    again.append([_entry(7, 3, 1)])
    again.close()
    assert FileRaftLog(OsFileSystem(), directory).end_offset == 8


def test_a_torn_tail_on_real_files_is_cut(tmp_path: Path) -> None:
    log = FileRaftLog(OsFileSystem(), str(tmp_path))
    log.append([_entry(0, 1, 2), _entry(2, 1, 2)])
    log.close()
    path = tmp_path / LOG_FILE
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    got = FileRaftLog(OsFileSystem(), str(tmp_path))
    assert got.entries() == [_entry(0, 1, 2)]
    assert path.stat().st_size < len(data) - 5  # the torn batch is gone
    got.append([_entry(2, 4, 1)])
    got.close()
    assert FileRaftLog(OsFileSystem(), str(tmp_path)).entries() == [_entry(0, 1, 2),
                                                                     _entry(2, 4, 1)]


# -- damaged snapshots ------------------------------------------------------------------


def _corrupt(fs: MemoryFileSystem, path: str) -> None:
    fs.poke(path, fs.size(path) - 1, bytes([fs.read_file(path)[-1] ^ 0xFF]))


def test_a_damaged_snapshot_falls_back_to_the_previous_one() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 2, 2)])
    log.take_snapshot(2, b"old")
    log.flush()
    fs.fail_next_write(LOG_FILE + ".tmp")  # a crash between the new snapshot and the rewrite
    with pytest.raises(OSError):
        log.take_snapshot(4, b"new")
    _corrupt(fs, posixpath.join(DIR, snapshot_file_name(4, 1)))
    got = FileRaftLog(fs, DIR)
    assert got.snapshot() == Snapshot(2, 1, b"old")
    assert got.entries() == [_entry(2, 1, 2), _entry(4, 2, 2)]


def test_a_damaged_only_snapshot_with_a_log_from_zero_is_not_needed() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2)])
    log.flush()
    fs.fail_next_write(LOG_FILE + ".tmp")
    with pytest.raises(OSError):
        log.take_snapshot(2, b"image")
    _corrupt(fs, posixpath.join(DIR, snapshot_file_name(2, 1)))
    got = FileRaftLog(fs, DIR)
    assert got.snapshot() is None
    assert got.entries() == [_entry(0, 1, 2), _entry(2, 1, 2)]


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "empty"])
def test_a_damaged_only_snapshot_is_one_clear_error(damage: str) -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2)])
    log.take_snapshot(2, b"the image")
    path = posixpath.join(DIR, snapshot_file_name(2, 1))
    if damage == "flip":
        _corrupt(fs, path)
    elif damage == "truncate":
        fs.cut(path, fs.size(path) - 2)
    elif damage == "magic":
        fs.poke(path, 0, b"XXXX")
    else:
        fs.cut(path, 0)
    with pytest.raises(RaftLogError) as info:
        FileRaftLog(fs, DIR)
    message = str(info.value)
    assert "\n" not in message
    assert path in message and "restore" in message and "aside" in message


def test_a_damaged_newest_snapshot_after_the_rewrite_is_an_error_not_a_gap() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2), _entry(4, 2, 2)])
    log.take_snapshot(2, b"old")
    old = fs.read_file(posixpath.join(DIR, snapshot_file_name(2, 1)))
    log.take_snapshot(4, b"new")
    fs.write_file(posixpath.join(DIR, snapshot_file_name(2, 1)), old)  # a stale survivor
    _corrupt(fs, posixpath.join(DIR, snapshot_file_name(4, 1)))
    with pytest.raises(RaftLogError, match=snapshot_file_name(4, 1)):
        FileRaftLog(fs, DIR)


def test_a_log_that_starts_late_without_a_snapshot_is_an_error() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 1, 2), _entry(2, 1, 2)])
    log.take_snapshot(2, b"image")
    fs.remove(posixpath.join(DIR, snapshot_file_name(2, 1)))
    with pytest.raises(RaftLogError, match="starts at offset 2") as info:
        FileRaftLog(fs, DIR)
    assert "\n" not in str(info.value) and LOG in str(info.value)


# -- the format ----------------------------------------------------------------------------


def test_entries_are_record_batches_with_epoch_control_flag_and_keys() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    entries = [_entry(0, 3, 1, control=True), _entry(1, 3, 3), _entry(4, 7, 1, control=True),
               Entry(5, 7, (b"", b"\x00" * 300))]
    log.append(entries)
    data = fs.read_file(LOG)
    batches = iter_batches(data)
    assert [h.base_offset for _, h in batches] == [0, 1, 4, 5]
    assert [h.partition_leader_epoch for _, h in batches] == [3, 3, 7, 7]
    assert [h.is_control for _, h in batches] == [True, False, True, False]
    for (pos, _), entry in zip(batches, entries, strict=True):
        _, records = decode_batch(data, pos)
        key = b"\x00\x00\x00\x02" if entry.control else None  # LEADER_CHANGE control key
        assert [r.key for r in records] == [key] * len(entry.records)
        assert tuple(r.value for r in records) == entry.records
        assert [r.offset for r in records] == list(range(entry.offset, entry.end))
    log.close()
    assert FileRaftLog(fs, DIR).entries() == entries


def test_a_snapshot_file_is_header_then_payload() -> None:
    fs = MemoryFileSystem()
    log = FileRaftLog(fs, DIR)
    log.append([_entry(0, 5, 2)])
    log.take_snapshot(2, b"payload")
    raw = fs.read_file(posixpath.join(DIR, "00000000000000000002-0000000005.checkpoint"))
    assert raw[:4] == b"ODS1" and raw[-7:] == b"payload" and len(raw) == 16 + 7


def test_a_crash_right_after_a_failed_write_or_sync_leaves_the_state_before_or_after() -> None:
    """A write or sync fails somewhere (a full disk, an I/O error) and the power goes
    at that moment: the log reopens as it was before the failed call or after it,
    never losing a flushed entry (unless a snapshot now covers it)."""
    places = ["", LOG_FILE, LOG_FILE + ".tmp", ".checkpoint", DIR]
    failures = 0
    for seed in range(300):
        rng = random.Random(seed)
        fs = MemoryFileSystem()
        file_log, mem = FileRaftLog(fs, DIR), MemoryRaftLog()
        if rng.random() < 0.5:
            fs.fail_next_write(rng.choice(places), keep_bytes=rng.randint(0, 80))
        else:
            fs.fail_next_sync(rng.choice(places))
        epoch = 1
        for _ in range(40):
            before = copy.deepcopy(mem)
            roll = rng.random()
            try:
                if roll < 0.5:
                    epoch = max(epoch, mem.last_epoch) + (rng.random() < 0.2)
                    entry = _entry(mem.end_offset, epoch, rng.randint(1, 3))
                    mem.append([entry])
                    file_log.append([entry])
                elif roll < 0.7:
                    mem.flush()
                    file_log.flush()
                elif roll < 0.8:
                    offset = rng.randint(mem.start_offset, mem.end_offset)
                    mem.truncate_to(offset)
                    file_log.truncate_to(offset)
                elif roll < 0.95 and mem.entries():
                    end = rng.choice(mem.entries()).end
                    mem.take_snapshot(end, b"image@%d" % end)
                    file_log.take_snapshot(end, b"image@%d" % end)
                else:
                    snap = Snapshot(mem.end_offset + rng.randint(-2, 3), mem.last_epoch
                                    + rng.randint(0, 1), b"leader@%d" % seed)
                    if snap.end_offset < 0:
                        continue
                    mem.install_snapshot(snap)
                    file_log.install_snapshot(snap)
            except OSError:
                failures += 1
                break
        else:
            continue
        fs.crash(random.Random(seed))
        got = FileRaftLog(fs, DIR)
        entries = got.entries()
        if got.snapshot() == before.snapshot():
            assert entries == before.entries()[: len(entries)], seed
            assert got.end_offset >= before.flushed_offset, seed
        else:
            assert got.snapshot() == mem.snapshot(), seed
            lineage = [e for e in before.entries() if e.offset >= got.start_offset]
            assert (entries == mem.entries()[: len(entries)]
                    or entries == lineage[: len(entries)]), seed
            assert entries == [] or entries[0].offset == got.start_offset, seed
            snap = got.snapshot()
            assert snap is not None and all(e.epoch >= snap.epoch for e in entries), seed
    assert failures > 200

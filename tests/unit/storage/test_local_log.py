"""The local log alone (storage/local_log.py): what it tells the log above it, and
what its flush jobs name. The façade's behaviour is tested through Log elsewhere."""

from __future__ import annotations

import errno

import pytest

from odradek.common.clock import ManualClock
from odradek.storage import LogConfig, MemoryFileSystem
from odradek.storage.errors import KafkaStorageError
from odradek.storage.handles import HandleCache
from odradek.storage.local_log import LocalLog, LogIo
from odradek.storage.segment import Segment
from tests.unit.storage.batches import make_batch

NOW = 1_700_000_000_000


class Owner:
    """The log above, recording what it is told."""

    def __init__(self) -> None:
        self.rolled: list[int] = []
        self.rolled_back: list[int] = []

    def segment_rolled(self, next_offset: int) -> None:
        self.rolled.append(next_offset)

    def writes_rolled_back(self, written: int) -> None:
        self.rolled_back.append(written)


def open_local(**config: object) -> tuple[LocalLog, Owner, MemoryFileSystem]:
    clock = ManualClock(NOW)
    fs = MemoryFileSystem(clock)
    fs.makedirs("/d/t-3")
    handles = HandleCache(fs, 8)
    cfg = LogConfig(**config)  # type: ignore[arg-type]
    seg = Segment.create(fs, handles, "/d/t-3", 0, max_index_bytes=cfg.segment_index_bytes,
                         index_interval_bytes=cfg.index_interval_bytes, now_ms=NOW)
    owner = Owner()
    return (LocalLog(fs, handles, clock, "/d/t-3", cfg, [seg], recovery_point=0, owner=owner,
                     io=LogIo()), owner, fs)


def write(local: LocalLog, offset: int, value: bytes = b"v") -> None:
    data = make_batch([value], base_offset=offset)
    local.write([data], [(offset, NOW, len(data))], len(data), NOW, NOW, 1)


def test_a_write_without_a_sink_is_published_at_once() -> None:
    local, _, _ = open_local()
    write(local, 0)
    assert local.log_end_offset == local.next_offset == 1 and not local.queue


def test_a_roll_tells_the_owner_where_the_new_segment_starts() -> None:
    local, owner, _ = open_local(segment_bytes=200)
    for offset in range(4):
        write(local, offset, b"x" * 60)
    assert len(local.segments) > 1
    assert owner.rolled == [s.base_offset for s in local.segments[1:]]
    # The rolled segment's index entries are not durable yet: nothing past its base is.
    assert local.recovery_point <= local.segments[-1].base_offset


def test_a_full_disk_rolls_the_log_back_and_tells_the_owner() -> None:
    local, owner, fs = open_local()
    write(local, 0)
    fs.fail_next_write("00000000000000000000.log", err=errno.ENOSPC)
    with pytest.raises(KafkaStorageError, match="no space left"):
        write(local, 1)
    assert owner.rolled_back == [1]
    assert local.log_end_offset == local.next_offset == 1 and not local.offline
    write(local, 1)  # the next append tries again
    assert local.log_end_offset == 2


def test_a_flush_job_names_its_partition_and_moves_the_recovery_point() -> None:
    local, _, _ = open_local()
    write(local, 0)
    job = local.begin_flush()
    assert job is not None and job.partition == ("t", 3)
    assert local.begin_flush() is None  # one at a time
    job.run()
    job.complete(None)
    assert local.recovery_point == 1 and local.flushes.in_flight is None

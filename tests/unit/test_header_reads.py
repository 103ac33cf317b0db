"""A batch header is read once on the produce path and once on a follower's append.

Every way the code reads a batch header is counted while a request's records
go from the replica manager to the log: the batch scan's one ``struct``
unpack per header (``odradek.storage.batch_scan._HEADER``), and every header
reader of ``odradek.wire`` (``read_batch_header``, ``validate_batch``,
``peek_offset_and_length``, ``iter_batches``, ``decode_batch``,
``decode_batches``, ``scan_batch``), replaced in every module that imported
it. A produced field of N batches, idempotent, transactional or a coordinator's
marker, must cost N header reads; so must a follower's fetch of N batches,
cut into segment-sized parts or not.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from odradek.broker.ports import ProduceEntry
from odradek.common.clock import ManualClock
from odradek.replication.partition import Origin, PartitionState
from odradek.storage import Log, LogConfig, MemoryFileSystem, batch_scan
from odradek.wire import batch as wire_batch
from odradek.wire import records as wire_records
from odradek.wire.records import (
    CONTROL_COMMIT,
    Record,
    build_batch,
    control_record,
)
from tests.unit.broker.test_replica_manager import setup

READERS = {
    **{name: getattr(wire_batch, name) for name in (
        "read_batch_header", "validate_batch", "peek_offset_and_length", "iter_batches")},
    **{name: getattr(wire_records, name) for name in (
        "decode_batch", "decode_batches", "scan_batch")},
}


class _CountingStruct:
    """Stands for the scan's header ``struct.Struct``, counting its unpacks."""

    def __init__(self, real: struct.Struct, counts: Counter[str]) -> None:
        self.real, self.counts = real, counts
        self.size = real.size

    def unpack_from(self, buf: Any, offset: int = 0) -> tuple[Any, ...]:
        self.counts["batch_scan"] += 1
        return self.real.unpack_from(buf, offset)


@contextmanager
def header_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)
        return wrapper

    with monkeypatch.context() as m:
        for module in [mod for key, mod in sys.modules.items()
                       if key.startswith("odradek") and mod is not None]:
            for name, real in READERS.items():
                if getattr(module, name, None) is real:
                    m.setattr(module, name, counting(name, real))
        m.setattr(batch_scan, "_HEADER", _CountingStruct(batch_scan._HEADER, counts))
        yield counts


def _batch(values: list[bytes], base: int = 0, **kw: Any) -> bytes:
    return build_batch([Record(base + i, 1_700_000_000_000, b"k", v)
                        for i, v in enumerate(values)], base_offset=base, **kw)


FIELDS = {
    "plain": [_batch([b"a", b"b"])],
    "three batches": [_batch([b"a"]), _batch([b"b"]), _batch([b"c", b"d"])],
    "idempotent": [_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=0)],
    "transactional": [_batch([b"a"], producer_id=6, producer_epoch=0, base_sequence=0,
                             transactional=True)],
}


@pytest.mark.parametrize("shape", sorted(FIELDS))
def test_a_produced_field_has_each_header_read_once(shape: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        manager, part, _ = setup(ManualClock())
        records = memoryview(b"".join(FIELDS[shape]))
        with header_reads(monkeypatch) as counts:
            [out] = manager.append_records([ProduceEntry("t", 0, records)], 1, frozenset(),
                                           lambda pid, epoch, tp: 0)
        assert out.error_code == 0 and part.state.log_end_offset > 0
        assert counts == Counter(batch_scan=len(FIELDS[shape]))
        await manager.partitions.close()

    asyncio.run(main())


def test_a_coordinator_marker_has_its_header_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(1_700_000_000_000)
    log = Log.open(MemoryFileSystem(clock), "/d/t-0", LogConfig(), clock)
    st = PartitionState("t", 0, log, local_id=1)
    assert st.append_as_leader(memoryview(FIELDS["transactional"][0]), Origin.CLIENT).appended
    marker = build_batch([control_record(CONTROL_COMMIT, offset=0, timestamp=1)],
                         producer_id=6, producer_epoch=0, control=True, transactional=True)
    with header_reads(monkeypatch) as counts:
        result = st.append_as_leader(memoryview(marker), Origin.COORDINATOR)
    assert result.appended and st.producers.producers[6].txn_first_offset < 0
    assert counts == Counter(batch_scan=1)


@pytest.mark.parametrize("segment_bytes", [1 << 20, 200])
def test_a_follower_fetch_has_each_header_read_once(segment_bytes: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(1_700_000_000_000)
    log = Log.open(MemoryFileSystem(clock), "/d/t-0", LogConfig(segment_bytes=segment_bytes),
                   clock)
    st = PartitionState("t", 0, log, local_id=2, leader_id=1)
    st.become_follower(1, 1)
    fetched = [_batch([b"a" * 60], 0), _batch([b"b" * 60], 1), _batch([b"c" * 60], 2),
               _batch([b"d"], 3, producer_id=5, producer_epoch=0, base_sequence=0)]
    with header_reads(monkeypatch) as counts:
        result = st.append_as_follower(memoryview(b"".join(fetched)), leader_hw=4)
    assert result.error_code == 0 and st.log_end_offset == 4 and st.high_watermark == 4
    assert (len(log.segments) > 1) == (segment_bytes < 1000)  # cut into parts, or not
    assert counts == Counter(batch_scan=len(fetched))

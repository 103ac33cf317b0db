"""Drop-behind and cold fetches (issue 19), on a real broker over real sockets.

Adaptive drop-behind (issue 39): while the kernel reports no memory pressure a
partition keeps everything it wrote cached, and a consumer catching up reads
none of it from the disk; past the total bound
(``odradek.log.page.cache.retain.bytes``) the oldest pages of all partitions go
first. With the bound at 0 (the fixed window, as before issue 39), a
partition written past its page-cache window has its oldest pages written
back and dropped (checked with ``mincore``, tests/support/pagecache.py). A
consumer reading them from the start, 32 MiB per fetch (more than the
kernel's read-ahead pulls in when the broker reads the first batch header),
still gets every record, and the broker reads what is cold off the event
loop first, the lookup's batch headers and then the slices: while such a
read is held (the warm-up seam waits on an event), a produce and a fetch on
other connections are answered. After a restart, a cold segment index is
read in off the loop too. No timing: every wait is on an event, a
response or a condition with a deadline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odradek.broker.net import transfer
from odradek.storage.mempressure import read_proc, under_pressure
from odradek.testing.broker import Broker
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.records import decode_batches
from tests.integration.test_io_thread import DEADLINE_S, fetch, produce
from tests.support.pagecache import resident
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="Linux only")

MiB = 1 << 20
VALUE = 64 * 1024
COUNT = 640  # 40 MiB in one partition, forty times its window
FETCH_BYTES = 32 * MiB  # a slice longer than the kernel's read-ahead (8 MiB here)


def _cached(path: Path, offset: int) -> bool:
    return resident(path, offset)


def _wait_for(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def broker() -> Iterator[Broker]:
    # retain 0: the window applies whatever the machine's memory (issue 39's
    # adaptive drop-behind keeps everything while memory is plentiful).
    with Broker(**{"odradek.log.page.cache.window.bytes": str(MiB),
                   "odradek.log.page.cache.retain.bytes": "0"}) as b:
        b.create_topic("cold", partitions=1)
        b.create_topic("hot", partitions=1)
        yield b


def _fill(broker: Broker) -> tuple[Path, list[bytes]]:
    client = RawClient(broker.bootstrap_servers, DEADLINE_S)
    values = [i.to_bytes(4, "big") * (VALUE // 4) for i in range(COUNT)]
    for i in range(0, COUNT, 8):
        assert produce(client, "cold", values[i:i + 8]).error_code == 0
    client.close()
    seg = Path(broker.data_dir) / "cold-0" / "00000000000000000000.log"
    _wait_for(lambda: not _cached(seg, 0), "the oldest page to leave the page cache")
    assert _cached(seg, seg.stat().st_size - 1)  # the newest stay
    return seg, values


def _produce_all(broker: Broker, topic: str, count: int) -> list[bytes]:
    client = RawClient(broker.bootstrap_servers, DEADLINE_S)
    values = [i.to_bytes(4, "big") * (VALUE // 4) for i in range(count)]
    for i in range(0, count, 8):
        assert produce(client, topic, values[i:i + 8]).error_code == 0
    client.close()
    return values


def _probes(path: Path) -> list[int]:
    """An offset in every MiB of ``path``."""
    return list(range(0, path.stat().st_size, MiB))


def test_without_memory_pressure_a_catching_up_consumer_reads_only_cached_pages() -> None:
    if under_pressure(read_proc()):
        pytest.skip("the machine reports memory pressure: the window applies")
    with Broker(**{"odradek.log.page.cache.window.bytes": str(MiB)}) as b:  # retain: default
        b.create_topic("cold", partitions=1)
        values = _produce_all(b, "cold", COUNT)
        trimmer = b.app.partitions.logs.page_cache
        assert trimmer.retain > 40 * MiB  # half the machine's memory
        seg = Path(b.data_dir) / "cold-0" / "00000000000000000000.log"
        assert trimmer.dropped_bytes == 0 and trimmer.total >= seg.stat().st_size
        assert all(_cached(seg, at) for at in _probes(seg))  # forty windows, all cached
        warmed, lookups = transfer.STATS.warmed_bytes, transfer.STATS.cold_lookups
        reader = RawClient(b.bootstrap_servers, DEADLINE_S)
        assert _read_all(reader, COUNT) == values
        assert (transfer.STATS.warmed_bytes, transfer.STATS.cold_lookups) == (warmed, lookups)


def test_past_the_retain_bound_the_oldest_pages_of_all_partitions_go_first() -> None:
    with Broker(**{"odradek.log.page.cache.window.bytes": str(MiB),
                   "odradek.log.page.cache.retain.bytes": str(8 * MiB)}) as b:
        b.create_topic("cold", partitions=1)
        b.create_topic("hot", partitions=1)
        _produce_all(b, "hot", 96)  # 6 MiB, written first
        _produce_all(b, "cold", COUNT)  # then 40 MiB
        first = Path(b.data_dir) / "hot-0" / "00000000000000000000.log"
        seg = Path(b.data_dir) / "cold-0" / "00000000000000000000.log"
        _wait_for(lambda: not _cached(first, 0), "hot's oldest page to leave the page cache")
        _wait_for(lambda: not _cached(seg, 0), "cold's oldest page to leave the page cache")
        assert _cached(seg, seg.stat().st_size - 1)  # the newest stay
        assert _cached(first, first.stat().st_size - 1)  # and hot's window
        assert b.app.partitions.logs.page_cache.total <= 8 * MiB + 4 * MiB


def _fetch_cold(client: RawClient, offset: int) -> tuple[int, list[bytes | None]]:
    """(high watermark, values from ``offset``) of cold-0, up to FETCH_BYTES."""
    resp = client.request(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=FETCH_BYTES,
                                       topics=[FetchTopic(topic="cold", partitions=[
                                           FetchPartition(partition=0, fetch_offset=offset,
                                                          partition_max_bytes=FETCH_BYTES)])]),
                          11)
    data = resp.responses[0].partitions[0]
    assert data.error_code == 0
    return data.high_watermark, [r.value for _, batch in decode_batches(bytes(data.records))
                                 for r in batch if r.offset >= offset]


def _read_all(client: RawClient, expect: int) -> list[bytes | None]:
    got: list[bytes | None] = []
    while len(got) < expect:
        _, values = _fetch_cold(client, len(got))
        assert values, f"fetch at {len(got)} returned nothing"
        got.extend(values)
    return got


def test_a_consumer_reads_dropped_pages_back_warmed_off_the_loop(broker: Broker) -> None:
    seg, values = _fill(broker)
    warmed = transfer.STATS.warmed_bytes
    reader = RawClient(broker.bootstrap_servers, DEADLINE_S)
    assert _read_all(reader, COUNT) == values
    assert transfer.STATS.warmed_bytes > warmed  # a cold slice was read in off the loop first
    assert _cached(seg, 0)


def test_a_held_cold_read_holds_up_only_its_own_fetch(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup of a fetch's start (the batch headers after an index entry) is
    read off the loop first, then the cold slice; while the first of those
    reads is held, other connections are served."""
    seg, values = _fill(broker)
    entered, release = threading.Event(), threading.Event()
    calls: list[list[tuple[str, int, int]]] = []
    real = transfer._read_in

    def held(cold: list[tuple[str, int, int]]) -> int:
        calls.append(list(cold))
        entered.set()
        assert release.wait(DEADLINE_S), "the test never released the read"
        return real(cold)

    monkeypatch.setattr(transfer, "_read_in", held)
    lookups = transfer.STATS.cold_lookups
    reader, other = (RawClient(broker.bootstrap_servers, DEADLINE_S) for _ in range(2))
    with ThreadPoolExecutor(1) as pool:
        cold = pool.submit(_fetch_cold, reader, 0)
        assert entered.wait(DEADLINE_S), "the cold fetch never read off the loop"
        # The first read off the loop is the lookup's: the page holding the first
        # batch header, with read-ahead, not yet the slice to send.
        assert calls == [[(str(seg), 0, transfer.LOOKUP_READ_AHEAD)]]
        assert transfer.STATS.cold_lookups == lookups + 1
        # Meanwhile the loop serves other connections.
        assert produce(other, "hot", [b"h0"], acks=-1).error_code == 0
        assert fetch(other, "hot") == (1, [b"h0"])
        assert not cold.done()
        release.set()
        hw, got = cold.result(DEADLINE_S)
    assert hw == COUNT and len(got) >= 8 and got == values[:len(got)]
    # Then the slice itself, longer than the read-ahead, was read in off the loop too.
    assert any(length > transfer.LOOKUP_READ_AHEAD for call in calls[1:] for _, _, length in call)


def _drop_all(directory: Path) -> None:
    """Every file of ``directory`` out of the page cache (whole files: the kernel
    drops only whole large folios)."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _dropped(directory: Path, probe: Path) -> bool:
    """Drop ``directory`` (:func:`_drop_all`); whether ``probe``'s first page is out."""
    _drop_all(directory)
    return not _cached(probe, 0)


def test_a_restarted_broker_loads_a_cold_segment_index_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a restart an old segment's index is read on its first use; on a cold
    page cache a thread reads it in, and the fetch gets the right records."""
    props = {"log.segment.bytes": str(2 * MiB)}
    values = [i.to_bytes(4, "big") * (VALUE // 4) for i in range(160)]  # 10 MiB, 5+ segments
    with Broker(data_dir=str(tmp_path), **props) as b:
        b.create_topic("cold", partitions=1)
        client = RawClient(b.bootstrap_servers, DEADLINE_S)
        for i in range(0, len(values), 8):
            assert produce(client, "cold", values[i:i + 8]).error_code == 0
        client.close()
    part = tmp_path / "cold-0"
    assert len(list(part.glob("*.log"))) >= 5
    calls: list[tuple[str, int, int]] = []
    real = transfer._read_in

    def recorded(cold: list[tuple[str, int, int]]) -> int:
        calls.extend(cold)
        return real(cold)

    monkeypatch.setattr(transfer, "_read_in", recorded)
    second = sorted(part.glob("*.index"))[1]
    with Broker(data_dir=str(tmp_path), **props) as b:
        # Drop until the second segment's index is out of the page cache (a
        # reader of it, or a page still under writeback, can keep it in).
        _wait_for(lambda: _dropped(part, second),
                  "the second segment's index to leave the page cache")
        reader = RawClient(b.bootstrap_servers, DEADLINE_S)
        offset = 45  # inside the second segment, past its first index entry
        _, got = _fetch_cold(reader, offset)
        assert got and got == values[offset:offset + len(got)]
        read_off_loop = {Path(path).suffix for path, _, _ in calls}
        assert ".index" in read_off_loop and ".log" in read_off_loop

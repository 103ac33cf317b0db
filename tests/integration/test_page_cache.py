"""Drop-behind and cold fetches (issue 19), on a real broker over real sockets.

A partition written past its page-cache window has its oldest pages written
back and dropped (checked with ``preadv2(RWF_NOWAIT)``, which fails for a page
not cached). A consumer reading them from the start still gets every record,
and the broker reads the cold slices in off the event loop first: while that
read is held (the warm-up seam waits on an event), a produce and a fetch on
other connections are answered. No timing: every wait is on an event, a
response or a condition with a deadline.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odradek.broker import transfer
from odradek.storage.log import FileSlice
from odradek.testing.broker import Broker
from tests.integration.test_io_thread import DEADLINE_S, fetch, produce
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="Linux only")

MiB = 1 << 20
VALUE = 64 * 1024
COUNT = 160  # 10 MiB in one partition, ten times its window


def _cached(path: Path, offset: int) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT)
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            pytest.skip("the file system does not support RWF_NOWAIT reads")
        raise
    finally:
        os.close(fd)


def _wait_for(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(**{"odradek.log.page.cache.window.bytes": str(MiB)}) as b:
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


def _read_all(client: RawClient, expect: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < expect:
        _, values = fetch(client, "cold", len(got))
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
    _, values = _fill(broker)
    entered, release = threading.Event(), threading.Event()
    real = transfer._read_in

    def held(cold: list[FileSlice]) -> int:
        entered.set()
        assert release.wait(DEADLINE_S), "the test never released the read"
        return real(cold)

    monkeypatch.setattr(transfer, "_read_in", held)
    reader, other = (RawClient(broker.bootstrap_servers, DEADLINE_S) for _ in range(2))
    with ThreadPoolExecutor(1) as pool:
        cold = pool.submit(fetch, reader, "cold", 0)
        assert entered.wait(DEADLINE_S), "the cold fetch never reached the warm-up"
        # Meanwhile the loop serves other connections.
        assert produce(other, "hot", [b"h0"], acks=-1).error_code == 0
        assert fetch(other, "hot") == (1, [b"h0"])
        assert not cold.done()
        release.set()
        hw, got = cold.result(DEADLINE_S)
    assert hw == COUNT and got and got == values[:len(got)]

"""Segment writes run off the event loop (issue 19): a write stalled in the kernel
holds up its own partition only.

The broker's file-system seam is a real :class:`OsFileSystem` whose handles
can hold every ``pwritev`` to one partition directory on a
:class:`threading.Event` (or fail it with ENOSPC). While ``held-0``'s append
is held, requests on other connections are answered: a produce to another
partition (acks=1 and acks=all), a fetch of it, and a fetch of ``held-0``
itself, which sees nothing past the last completed write. Releasing the
event completes the held produce (and one queued behind it, in order). No
timing: every wait is on an event or a response, with a deadline.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from odradek.storage.fs import OsFileHandle, OsFileSystem
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.primitives import Buffer
from odradek.wire.records import Record, build_batch, decode_batches
from tests.support.rawclient import RawClient

DEADLINE_S = 10.0


class _Handle(OsFileHandle):
    __slots__ = ("seam",)

    def __init__(self, path: str, fd: int, seam: HoldingFileSystem) -> None:
        super().__init__(path, fd)
        self.seam = seam

    def pwrite(self, position: int, chunks: Sequence[Buffer]) -> None:
        seam = self.seam
        if seam.target in self.path and self.path.endswith(".log"):
            if seam.hold.is_set():
                seam.entered.set()
                assert seam.release.wait(DEADLINE_S), "the test never released the write"
            if seam.fail_next:
                seam.fail_next = False
                raise OSError(errno.ENOSPC, "No space left on device (injected)")
        super().pwrite(position, chunks)


class HoldingFileSystem(OsFileSystem):
    """Real files; writes to segment files under a directory named ``target`` wait
    for ``release`` while ``hold`` is set (``entered`` says one is waiting), and
    the next one fails with ENOSPC when ``fail_next`` is set."""

    def __init__(self, target: str) -> None:
        self.target = f"/{target}/"
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_next = False

    def open(self, path: str, *, create: bool = False) -> OsFileHandle:
        handle = super().open(path, create=create)
        return _Handle(handle.path, handle.fileno(), self)


@pytest.fixture
def seam() -> HoldingFileSystem:
    return HoldingFileSystem("held-0")


@pytest.fixture
def broker(seam: HoldingFileSystem) -> Iterator[Broker]:
    with Broker(fs=seam, **{"odradek.log.writer.threads": "2"}) as b:
        b.create_topic("held", partitions=1)
        b.create_topic("free", partitions=1)
        yield b
    seam.release.set()


def produce(client: RawClient, topic: str, values: list[bytes], acks: int = 1) -> Any:
    batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)])
    resp = client.request(ProduceRequest(acks=acks, timeout_ms=int(DEADLINE_S * 1000),
                                         topic_data=[TopicProduceData(name=topic, partition_data=[
                                             PartitionProduceData(index=0, records=batch)])]), 9)
    return resp.responses[0].partition_responses[0]


def fetch(client: RawClient, topic: str, offset: int = 0) -> tuple[int, list[bytes]]:
    """(high watermark, values from ``offset``) of ``topic``-0, without waiting."""
    resp = client.request(FetchRequest(max_wait_ms=0, min_bytes=0, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                partition_max_bytes=1 << 20)])]), 11)
    data = resp.responses[0].partitions[0]
    assert data.error_code == 0
    values = [r.value for _, batch in decode_batches(bytes(data.records or b""))
              for r in batch if r.offset >= offset]
    return data.high_watermark, values


def test_a_held_append_holds_up_only_its_own_partition(
        broker: Broker, seam: HoldingFileSystem) -> None:
    clients = [RawClient(broker.bootstrap_servers, DEADLINE_S) for _ in range(4)]
    held_a, held_b, other, reader = clients
    assert produce(other, "held", [b"h0"]).base_offset == 0
    seam.hold.set()
    with ThreadPoolExecutor(2) as pool:
        first: Future[Any] = pool.submit(produce, held_a, "held", [b"h1", b"h2"])
        assert seam.entered.wait(DEADLINE_S), "the append never reached the file system"
        second: Future[Any] = pool.submit(produce, held_b, "held", [b"h3"], -1)
        # Meanwhile the broker serves every other connection.
        assert produce(other, "free", [b"f0"]).error_code == 0
        done = produce(other, "free", [b"f1"], acks=-1)
        assert (done.error_code, done.base_offset) == (0, 1)
        assert fetch(reader, "free") == (2, [b"f0", b"f1"])
        # The held partition shows nothing past its last completed write.
        assert fetch(reader, "held") == (1, [b"h0"])
        assert not first.done() and not second.done()
        seam.hold.clear()
        seam.release.set()
        one, two = first.result(DEADLINE_S), second.result(DEADLINE_S)
    assert (one.error_code, one.base_offset) == (0, 1)
    assert (two.error_code, two.base_offset) == (0, 3)  # queued behind, in order
    assert fetch(reader, "held") == (4, [b"h0", b"h1", b"h2", b"h3"])
    for client in clients:
        client.close()


def test_a_failed_write_fails_the_appends_queued_behind_it_and_the_log_goes_on(
        broker: Broker, seam: HoldingFileSystem) -> None:
    """ENOSPC on the writer thread: the failed append and the one assigned after it
    (queued behind, not written) get KAFKA_STORAGE_ERROR; the log rolls back to
    its written end, serves on, and the next append takes the next offset there."""
    clients = [RawClient(broker.bootstrap_servers, DEADLINE_S) for _ in range(3)]
    held_a, held_b, other = clients
    assert produce(other, "held", [b"h0"]).base_offset == 0
    seam.fail_next = True
    seam.hold.set()
    with ThreadPoolExecutor(2) as pool:
        first: Future[Any] = pool.submit(produce, held_a, "held", [b"lost-1"])
        assert seam.entered.wait(DEADLINE_S)
        second: Future[Any] = pool.submit(produce, held_b, "held", [b"lost-2"], -1)
        assert produce(other, "free", [b"f0"]).error_code == 0  # still serving
        seam.hold.clear()
        seam.release.set()
        one, two = first.result(DEADLINE_S), second.result(DEADLINE_S)
    assert one.error_code == two.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    again = produce(other, "held", [b"h1"], acks=-1)
    assert (again.error_code, again.base_offset) == (0, 1)
    assert fetch(other, "held") == (2, [b"h0", b"h1"])
    for client in clients:
        client.close()


def _log_dirs(client: RawClient) -> dict[tuple[str, bool], tuple[str, int]]:
    """DescribeLogDirs of ``held``-0: (topic, is future) → (directory, offset lag)."""
    resp = client.request(DescribeLogDirsRequest(topics=None), 4)
    return {(t.name, p.is_future_key): (r.log_dir, p.offset_lag)
            for r in resp.results for t in r.topics for p in t.partitions
            if t.name == "held" and p.partition_index == 0}


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_partition_moves_to_another_log_dir_with_a_write_held_and_keeps_it(
        seam: HoldingFileSystem, tmp_path: Path) -> None:
    """AlterReplicaLogDirs while an append's write is held on the writer thread: the
    copy catches up with the written end (offset lag 0 at offset 1) while the
    partition stays in its directory, and once the write is released the move
    finishes with the record at its offset (nothing lost in the swap) and the
    moved log takes the next append after it. (That the swap waits for the write,
    step by step: tests/unit/broker/test_move_with_writes.py.)"""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with Broker(fs=seam, **{"odradek.log.writer.threads": "2",
                            "log.dirs": ",".join(dirs)}) as broker:
        broker.create_topic("held", partitions=1)
        clients = [RawClient(broker.bootstrap_servers, DEADLINE_S) for _ in range(2)]
        writer, admin = clients
        assert produce(writer, "held", [b"h0"]).base_offset == 0
        source = _log_dirs(admin)[("held", False)][0]
        target = next(d for d in dirs if d != source)
        seam.hold.set()
        with ThreadPoolExecutor(1) as pool:
            first: Future[Any] = pool.submit(produce, writer, "held", [b"h1"])
            assert seam.entered.wait(DEADLINE_S), "the append never reached the file system"
            resp = admin.request(AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(
                target, [AlterReplicaLogDirTopic("held", [0])])]), 2)
            assert resp.results[0].partitions[0].error_code == 0
            # The copy has what is written (offset 0); the held write keeps it from
            # swapping in.
            _until(lambda: _log_dirs(admin).get(("held", True)) == (target, 0),
                   "the future log to catch up with the written end")
            assert _log_dirs(admin)[("held", False)][0] == source
            assert not first.done()
            seam.hold.clear()
            seam.release.set()
            assert (first.result(DEADLINE_S).error_code, first.result().base_offset) == (0, 1)
        _until(lambda: ("held", True) not in _log_dirs(admin), "the move to finish")
        assert _log_dirs(admin)[("held", False)][0] == target
        assert fetch(admin, "held") == (2, [b"h0", b"h1"])
        assert produce(writer, "held", [b"h2"], acks=-1).base_offset == 2
        assert fetch(admin, "held") == (3, [b"h0", b"h1", b"h2"])
        for client in clients:
            client.close()

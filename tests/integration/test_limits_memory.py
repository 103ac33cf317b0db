"""Request memory under hostile and heavy load, measured on a real ``odradek serve``.

Memory, not time: the broker runs as a subprocess and its resident set
(``VmRSS``) and high-water mark (``VmHWM``) are read from ``/proc``. Before a
reading, the test waits until the broker has read every byte sent to it: the
receive queues of the broker's sockets in ``/proc/net/tcp`` are empty.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.produce_response import ProduceResponse
from odradek.wire.records import Record, build_batch
from tests.support.process import ServerProcess
from tests.support.rawclient import RawClient

MiB = 1 << 20


def status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


def unread_bytes(port: int) -> int:
    """Bytes waiting in the receive queues of sockets bound to local ``port``."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01":  # ESTABLISHED
                total += int(fields[4].split(":")[1], 16)
    return total


def wait_all_read(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (left := unread_bytes(port)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == 0, f"the broker left {left} bytes unread"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path)
    yield proc
    proc.kill()


def produce_and_consume(bootstrap: str, topic: str, count: int, size: int) -> None:
    """A normal client's round trip: ``count`` records acknowledged, then read back."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, i.to_bytes(4, "big") * (size // 4),
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "normal",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < count and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None
                assert m.value() == seen.to_bytes(4, "big") * (size // 4)
                seen += 1
        assert seen == count
    finally:
        consumer.close()


def test_announced_but_unsent_frames_cost_nothing(server: ServerProcess) -> None:
    server.start()
    pid = server.proc.pid if server.proc else 0
    host, port = server.bootstrap.rsplit(":", 1)
    produce_and_consume(server.bootstrap, "warm", 200, 1024)
    before = status_mib(pid, "VmRSS")
    hostile = []
    try:
        for _ in range(200):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(struct.pack(">i", 100_000_000) + b"\x00" * 1024)
            hostile.append(sock)
        wait_all_read(int(port))
        # A normal client is served meanwhile, with frames large enough to take
        # the large-frame path (5,000 x 1 KiB in batches of up to 1 MB).
        produce_and_consume(server.bootstrap, "normal", 5000, 1024)
        grown = status_mib(pid, "VmRSS") - before
        assert grown < 64, f"RSS grew by {grown:.1f} MiB for 200 announced 100 MB frames"
    finally:
        for sock in hostile:
            sock.close()


def test_two_thousand_idle_connections_are_cheap(server: ServerProcess) -> None:
    server.start()
    pid = server.proc.pid if server.proc else 0
    produce_and_consume(server.bootstrap, "warm", 10, 100)
    before = status_mib(pid, "VmRSS")
    clients: list[RawClient] = []
    try:
        for _ in range(2000):  # each made one request and then went quiet
            client = RawClient(server.bootstrap)
            assert client.request(ApiVersionsRequest(), 0).error_code == 0
            clients.append(client)
        grown = status_mib(pid, "VmRSS") - before
        assert grown < 200, f"2,000 idle connections cost {grown:.1f} MiB"
        produce_and_consume(server.bootstrap, "after", 100, 100)  # still serving
    finally:
        for client in clients:
            client.close()


def _produce_bodies(topic: str, count: int, size: int) -> list[ProduceRequest]:
    out = []
    for n in range(count):
        batch = build_batch([Record(i, 0, None, bytes([n % 256]) * 1000)
                             for i in range(size // 1000)])
        out.append(ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]))
    return out


def test_low_request_memory_bound_means_backpressure_not_failure(
    server: ServerProcess,
) -> None:
    bound = 8 * MiB
    server.overrides += [f"queued.max.request.bytes={bound}", "message.max.bytes=4194304",
                         "num.partitions=1"]
    server.start()
    pid = server.proc.pid if server.proc else 0
    # Every append waits for its fsync (flush.messages=1), so requests arrive
    # much faster than they are answered and would pile up without the bound.
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("load", 1, 1, config={"flush.messages": "1"})])["load"].result(30)
    produce_and_consume(server.bootstrap, "load", 10, 100)
    bodies = _produce_bodies("load", 6, 1_500_000)  # 6 requests of 1.5 MB
    baseline = status_mib(pid, "VmHWM")
    errors: list[str] = []

    def pipeline() -> None:
        # 16 connections x 6 pipelined 1.5 MB produce requests = 144 MB in flight
        # at once, 18 times the bound: all must be answered, none refused.
        try:
            client = RawClient(server.bootstrap, timeout_s=60)
            try:
                data = b"".join(client.conn.send(b, 9) for b in bodies)
                ready.wait(60)
                client.send_raw(data)
                for _ in bodies:
                    while (got := client.conn.next_response()) is None:
                        data = client.sock.recv(1 << 16)
                        if not data:
                            raise ConnectionError("closed")
                        client.conn.receive_data(data)
                    resp = got[1]
                    assert isinstance(resp, ProduceResponse)
                    code = resp.responses[0].partition_responses[0].error_code
                    if code:
                        errors.append(f"error {code}")
            finally:
                client.close()
        except Exception as exc:  # reported by the main thread
            errors.append(repr(exc))

    threads = [threading.Thread(target=pipeline) for _ in range(16)]
    ready = threading.Barrier(len(threads) + 1)  # every request encoded before any is sent
    for t in threads:
        t.start()
    ready.wait(60)
    for t in threads:
        t.join(120)
    assert not errors
    grown = status_mib(pid, "VmHWM") - baseline
    # The bound, one frame let through when only unfinished frames hold memory,
    # and a fixed overhead (decoding, responses, the log's buffers). Without the
    # bound this grows by about 75 MiB.
    assert grown < (bound + 1_500_000) / MiB + 24, f"peak RSS grew by {grown:.1f} MiB"
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "c"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("load", 0), timeout=10)
        assert high - low == 10 + 16 * 6 * 1500  # every record of every request
    finally:
        consumer.close()


def test_a_request_larger_than_the_memory_bound_is_refused(server: ServerProcess) -> None:
    server.overrides += [f"queued.max.request.bytes={MiB}"]
    server.start()
    client = RawClient(server.bootstrap)
    try:
        client.send_raw(struct.pack(">i", MiB + 1) + b"\x00" * 100)
        assert client.is_closed_by_peer()
    finally:
        client.close()
    other = RawClient(server.bootstrap)
    try:
        assert other.request(ApiVersionsRequest(), 0).error_code == 0
    finally:
        other.close()


def test_unfinished_frames_that_fill_the_bound_do_not_deadlock() -> None:
    """Three connections each send most of a 1 MB produce frame; together
    they exceed the 2 MiB bound, so all stop being read while nothing complete
    can give memory back. The broker lets the one closest to completion
    through, then the others as memory comes back: every request is answered."""
    from odradek.testing.broker import Broker

    with Broker(**{"queued.max.request.bytes": str(2 * MiB), "num.partitions": "1"}) as broker:
        server = broker.app.server
        assert server is not None
        broker.create_topic("deadlock", partitions=1)
        clients = [RawClient(broker.bootstrap_servers, timeout_s=30) for _ in range(3)]
        frames = [c.conn.send(b, 9) for c, b in zip(
            clients, _produce_bodies("deadlock", 3, 1_000_000), strict=True)]
        for client, frame in zip(clients, frames, strict=True):
            client.send_raw(frame[:-1000])
        deadline = time.monotonic() + 10
        while server.stats["memory_paused"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.stats["memory_paused"] >= 1
        for client, frame in zip(clients, frames, strict=True):
            client.send_raw(frame[-1000:])
        for client in clients:
            while (got := client.conn.next_response()) is None:
                data = client.sock.recv(1 << 16)
                assert data, "connection closed"
                client.conn.receive_data(data)
            resp = got[1]
            assert resp.responses[0].partition_responses[0].error_code == 0
            client.close()
        assert server.stats["memory_granted"] >= 1
        # Memory is released right after each answer is written, on the broker's
        # thread: wait for it rather than race it.
        deadline = time.monotonic() + 10
        while server.memory.used and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.memory.used == 0

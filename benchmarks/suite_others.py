"""The brokers Python users pick instead of Kafka, measured the same way.

- Redis Streams (Debian's ``redis-server``): append-only file with
  ``appendfsync everysec`` (data in the page cache at the ack, fsync each
  second, like Kafka's default), no RDB snapshots. Produce: ``XADD`` of
  ``count`` values, pipelined 1,000 per round trip (redis-py with hiredis).
  Consume: ``XREADGROUP ... NOACK COUNT 10000`` until every record is read.
- NATS JetStream (Debian's ``nats-server -js``) with file storage. Produce:
  JetStream publishes, each acknowledged by the server, 512 in flight at a
  time (nats-py). Consume: a pull consumer with ``AckPolicy.NONE`` fetching
  1,000 at a time.

Each server runs on 127.0.0.1 on a free port with a private temporary
directory and is stopped (SIGTERM, then SIGKILL) when done. :func:`missing`
says how to install what is not there.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

from _common import proc_cpu_seconds, proc_memory_mib
from suite_kafka import Rate

INSTALL = {
    "redis": ("redis-server", "apt-get install redis-server && pip install redis hiredis"),
    "nats": ("nats-server", "apt-get install nats-server && pip install nats-py"),
}


def missing(name: str) -> str | None:
    """None when ``name`` can run here, else how to install it."""
    binary, how = INSTALL[name]
    module = "redis" if name == "redis" else "nats"
    try:
        __import__(module)
    except ImportError:
        return how
    return None if shutil.which(binary) else how


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class Server:
    """A server subprocess on a free port; ``ready_s`` is Popen to port open."""

    name = ""

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        self.port = _free_port()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.tmp)
        _wait_port(self.port, self.proc)
        self.ready_s = time.perf_counter() - t0

    def command(self) -> list[str]:
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.proc.pid)

    def rss_mib(self) -> float:
        return proc_memory_mib(self.proc.pid)["VmRSS"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


class RedisServer(Server):
    name = "redis"

    def command(self) -> list[str]:
        return ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.tmp, "--save", "", "--appendonly", "yes",
                "--appendfsync", "everysec", "--protected-mode", "no"]

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    def produce(self, stream: str, count: int, size: int) -> Rate:
        r = self.client()
        value = (os.urandom(size // 2) + b"x" * size)[:size]
        cpu0 = self.cpu_seconds()
        t0 = time.perf_counter()
        sent = 0
        while sent < count:
            pipe = r.pipeline(transaction=False)
            n = min(1000, count - sent)
            for _ in range(n):
                pipe.xadd(stream, {"v": value})
            pipe.execute()
            sent += n
        elapsed = time.perf_counter() - t0
        r.close()
        return Rate(elapsed, count, count * size, self.cpu_seconds() - cpu0)

    def consume(self, stream: str, count: int) -> Rate:
        r = self.client()
        r.xgroup_create(stream, "bench", id="0")
        cpu0 = self.cpu_seconds()
        t0 = time.perf_counter()
        got = nbytes = 0
        while got < count:
            reply = r.xreadgroup("bench", "c1", {stream: ">"}, count=10_000, noack=True)
            for _name, entries in reply:
                for _id, fields in entries:
                    nbytes += len(fields[b"v"])
                got += len(entries)
        elapsed = time.perf_counter() - t0
        r.close()
        return Rate(elapsed, got, nbytes, self.cpu_seconds() - cpu0)


class NatsServer(Server):
    name = "nats"

    def command(self) -> list[str]:
        return ["nats-server", "-js", "-sd", self.tmp, "-a", "127.0.0.1",
                "-p", str(self.port)]

    async def _connect(self) -> tuple[Any, Any]:
        import nats

        nc = await nats.connect(f"nats://127.0.0.1:{self.port}")
        return nc, nc.jetstream(timeout=30)

    def produce(self, stream: str, count: int, size: int) -> Rate:
        async def run() -> Rate:
            from nats.js.api import StorageType

            nc, js = await self._connect()
            await js.add_stream(name=stream, subjects=[stream], storage=StorageType.FILE)
            value = (os.urandom(size // 2) + b"x" * size)[:size]
            cpu0 = self.cpu_seconds()
            t0 = time.perf_counter()
            sent = 0
            while sent < count:
                n = min(512, count - sent)
                await asyncio.gather(*(js.publish(stream, value) for _ in range(n)))
                sent += n
            elapsed = time.perf_counter() - t0
            await nc.close()
            return Rate(elapsed, count, count * size, self.cpu_seconds() - cpu0)

        return asyncio.run(run())

    def consume(self, stream: str, count: int) -> Rate:
        async def run() -> Rate:
            from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

            nc, js = await self._connect()
            sub = await js.pull_subscribe(stream, durable="bench", config=ConsumerConfig(
                ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL))
            cpu0 = self.cpu_seconds()
            t0 = time.perf_counter()
            got = nbytes = 0
            while got < count:
                for m in await sub.fetch(min(1000, count - got), timeout=30):
                    nbytes += len(m.data)
                    got += 1
            elapsed = time.perf_counter() - t0
            await nc.close()
            return Rate(elapsed, got, nbytes, self.cpu_seconds() - cpu0)

        return asyncio.run(run())


SERVERS: dict[str, type[Server]] = {"redis": RedisServer, "nats": NatsServer}

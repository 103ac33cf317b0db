"""Helpers of the console tests: the web console in this process (on a
thread with its own event loop), HTTP requests as a browser makes them, and
a few confluent-kafka steps."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.console.app import IDLE_TIMEOUT_S, ConsoleServer
from odradek.console.state import Console


class RunningConsole:
    """``odradek console`` on 127.0.0.1 (any free port), on a thread of its own."""

    def __init__(self, bootstrap: str, sample_interval_s: float = 0.5,
                 security: ClientSecurity = PLAINTEXT,
                 metrics_urls: list[str] | None = None,
                 idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.state = Console(bootstrap, security, metrics_urls or [], sample_interval_s)
        self.server = ConsoleServer(self.state, "127.0.0.1", 0, idle_timeout_s)
        self.url = self._call(self.server.start()).rstrip("/")

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self._call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Reply:
    status: int
    url: str
    body: str


def get(url: str, timeout: float = 20.0) -> Reply:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return Reply(r.status, r.url, r.read().decode())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, url, exc.read().decode())


def post(url: str, fields: dict[str, str], timeout: float = 30.0) -> Reply:
    """A form POST; the 303 it answers is followed (as a browser does)."""
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=timeout) as r:
            return Reply(r.status, r.url, r.read().decode())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, url, exc.read().decode())


def query(reply: Reply) -> dict[str, str]:
    """The ``ok`` / ``error`` banner parameters of the page a POST ended on."""
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(reply.url).query))


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, values: list[str], key: str | None = None,
            headers: list[tuple[str, bytes]] | None = None,
            partition: int | None = None) -> None:
    """``partition``: all to that one (else the client's partitioner chooses)."""
    p = Producer({"bootstrap.servers": bootstrap})
    where = {} if partition is None else {"partition": partition}
    for v in values:
        p.produce(topic, value=v.encode(), key=key.encode() if key else None,
                  headers=headers or [], **where)
    assert p.flush(15) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    """Read ``count`` records of ``topic`` as ``group``, commit, and leave the group."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen += 1
        assert seen == count, f"read {seen} of {count}"
        c.commit(asynchronous=False)
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        c.close()

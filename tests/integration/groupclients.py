"""Group consumers of each real client, each polling on a thread of its own.

Every runner keeps the partitions it owns now and every value it received, so
tests can wait on conditions ("each owns 2", "all 600 seen") with deadlines.
One thread per consumer matters: kafka-python drops a JoinGroup answer that
arrives between two of its ``poll()`` calls and joins again, so polling
several of its consumers in turn from one thread can rebalance forever.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer
from kafka import KafkaConsumer

CLIENTS = ["confluent-range", "confluent-cooperative", "kafka-python", "aiokafka"]


def wait_until(
    predicate: Callable[[], bool], timeout_s: float, what: str,
    detail: Callable[[], object] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}{extra}")
        time.sleep(0.05)


class Runner:
    """A consumer of ``client`` kind in ``group`` subscribed to ``topic``."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str,
                 **options: Any) -> None:
        self.client, self.bootstrap, self.group, self.topic = client, bootstrap, group, topic
        self.options = options
        self.values: list[bytes] = []
        self._owned: frozenset[int] = frozenset()
        self.history: list[frozenset[int]] = [frozenset()]
        """Every assignment this consumer has had, in order."""
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    @property
    def owned(self) -> frozenset[int]:
        return self._owned

    @owned.setter
    def owned(self, value: frozenset[int]) -> None:
        if value != self._owned:
            self.history.append(value)
        self._owned = value

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.client} consumer did not stop"

    def _main(self) -> None:
        try:
            if self.client.startswith("confluent"):
                self._confluent()
            elif self.client == "kafka-python":
                self._kafka_python()
            else:
                asyncio.run(self._aiokafka())
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc

    def _confluent(self) -> None:
        strategy = "cooperative-sticky" if self.client.endswith("cooperative") else "range"
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **self.options}
        consumer = Consumer(conf)
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.05)
                if msg is not None and not msg.error():
                    self.values.append(msg.value())
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    def _kafka_python(self) -> None:
        consumer = KafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", session_timeout_ms=6000,
            heartbeat_interval_ms=500, **self.options,
        )
        try:
            while not self._stop.is_set():
                # A long poll: kafka-python must be inside poll() when its JoinGroup
                # is answered (see the module docstring).
                for records in consumer.poll(500).values():
                    self.values.extend(r.value for r in records)
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close(autocommit=True)

    async def _aiokafka(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            auto_offset_reset="earliest", session_timeout_ms=6000,
            heartbeat_interval_ms=500, **self.options,
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                for records in batches.values():
                    self.values.extend(r.value for r in records)
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


def check(runners: list[Runner]) -> None:
    for r in runners:
        if r.error is not None:
            raise AssertionError(f"{r.client} consumer failed: {r.error!r}")

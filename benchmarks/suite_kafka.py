"""Kafka-protocol measurements of the suite: one function per figure, each
taking a target (``odradek serve`` or librdkafka's mock cluster) reached over
loopback TCP with the Python confluent-kafka client and identical settings.

Produce: ``count`` records round-robin over the partitions, clock from the
first ``produce()`` to ``flush()`` returning with every record acknowledged.
Consume: a fresh consumer assigns every partition and reads the newest
``window`` records of each (the mock keeps only ~5 MiB per partition), clock
from ``assign()`` to the last record. Latency: a paced producer stamps
``perf_counter_ns`` into each value; a consumer thread in this process
records arrival minus stamp. Group fetch: three members of one group (a thread
each) subscribe at once and read everything; clock from ``subscribe()`` to the
last record, so the join is included.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from _common import MockCluster, ServerProcess, percentile, proc_cpu_seconds
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PRODUCER: dict[str, Any] = {
    "linger.ms": 5, "batch.size": 1 << 20, "batch.num.messages": 1_000_000,
    "message.max.bytes": 1_048_588, "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
}
CONSUMER: dict[str, Any] = {
    "enable.auto.commit": False, "auto.offset.reset": "earliest",
    # above every window: librdkafka never pauses fetching for a full queue
    "queued.min.messages": 1_000_000, "fetch.wait.max.ms": 10,
}


class Target(Protocol):
    name: str
    bootstrap: str

    def create_topic(self, topic: str, partitions: int) -> None: ...
    def delete_topic(self, topic: str) -> None: ...
    def cpu_seconds(self) -> float: ...


class OdradekTarget:
    name = "odradek"

    def __init__(self, broker: ServerProcess) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str, partitions: int) -> None:
        self.admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic])[topic].result(60)

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.broker.pid)


class MockTarget:
    name = "mock"

    def __init__(self, mock: MockCluster) -> None:
        self.mock = mock
        self.bootstrap = mock.bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        self.mock.create_topic(topic, partitions)

    def delete_topic(self, topic: str) -> None:
        self.mock.delete_topic(topic)

    def cpu_seconds(self) -> float:
        return self.mock.cpu_seconds()


@dataclass
class Rate:
    seconds: float
    messages: int
    value_bytes: int
    server_cpu_s: float

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        """Megabytes (10^6 bytes) of values per second."""
        return self.value_bytes / self.seconds / 1e6

    @property
    def cpu_s_per_gb(self) -> float:
        return self.server_cpu_s / (self.value_bytes / 1e9)


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(target: Target, topic: str, partitions: int, count: int, size: int, acks: str,
            compression: str) -> Rate:
    acked = 0
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif len(errors) < 5:
            errors.append(err)

    producer = Producer({"bootstrap.servers": target.bootstrap, **PRODUCER, "acks": acks,
                         "compression.type": compression})
    producer.list_topics(topic, timeout=10)
    # half random, half repeated: compressible like real payloads, not trivially
    value = (os.urandom(size // 2) + b"x" * size)[:size]
    send = producer.produce
    cpu0 = target.cpu_seconds()
    t0 = time.perf_counter()
    for i in range(count):
        try:
            send(topic, value, partition=i % partitions, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            send(topic, value, partition=i % partitions, on_delivery=delivered)
        if not i & 4095:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = target.cpu_seconds() - cpu0
    if left or errors or acked != count:
        raise RuntimeError(f"{target.name} produce: {acked}/{count} acked, errors {errors}")
    return Rate(elapsed, count, count * size, cpu)


def consume(target: Target, topic: str, partitions: int, window: int) -> Rate:
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": fresh_topic("c"),
                         **CONSUMER})
    try:
        starts, want = [], 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            starts.append(TopicPartition(topic, p, max(low, high - window)))
            want += high - starts[-1].offset
        cpu0 = target.cpu_seconds()
        t0 = time.perf_counter()
        consumer.assign(starts)
        got = nbytes = 0
        deadline = time.monotonic() + 120
        while got < want:
            msgs = consumer.consume(min(10_000, want - got), 1.0)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{target.name} consume: {got}/{want} records")
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"{target.name} consume: {m.error()}")
                nbytes += len(m)
            got += len(msgs)
        elapsed = time.perf_counter() - t0
        return Rate(elapsed, got, nbytes, target.cpu_seconds() - cpu0)
    finally:
        consumer.close()


@dataclass
class Latency:
    p50_ms: float
    p99_ms: float
    p999_ms: float
    achieved_rate: float


def latency(target: Target, topic: str, partitions: int, rate: int, seconds: float) -> Latency:
    """100-byte records at ``rate``/s, acks=1, linger.ms=0."""
    total = int(rate * seconds)
    samples: list[int] = []
    ready = threading.Event()
    failure: list[BaseException] = []
    pad = b"\0" * 91

    def reader() -> None:
        consumer = Consumer({"bootstrap.servers": target.bootstrap,
                             "group.id": fresh_topic("lat"), **CONSUMER})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            seen_warm = 0
            deadline = time.monotonic() + seconds + 60
            while len(samples) < total and time.monotonic() < deadline:
                msg = consumer.poll(0.05)  # poll: consume(n) would wait for n records
                now = time.perf_counter_ns()
                if msg is None or msg.error() is not None:
                    continue
                value = msg.value()
                if value[:1] == b"M":
                    samples.append(now - int.from_bytes(value[1:9], "big"))
                else:
                    seen_warm += 1
                    if seen_warm == partitions:
                        ready.set()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
        finally:
            consumer.close()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    producer = Producer({"bootstrap.servers": target.bootstrap, **PRODUCER, "acks": "1",
                         "linger.ms": 0})
    for p in range(partitions):
        producer.produce(topic, b"W" + pad, partition=p)
    producer.flush(10)
    if not ready.wait(30) or failure:
        raise RuntimeError(f"{target.name} latency warm-up failed {failure}")
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            producer.produce(topic, b"M" + time.perf_counter_ns().to_bytes(8, "big") + pad,
                             partition=sent % partitions)
            sent += 1
        producer.poll(0)
        # 1 ms steps: a tighter loop starves the broker and the consumer thread
        # of CPU on a small machine (p99 at 10k/s: 30-130 ms at 0.2 ms, 3 ms at 1 ms)
        time.sleep(0.001)
    achieved = total / (time.perf_counter() - t0)
    producer.flush(30)
    thread.join(seconds + 60)
    if failure or len(samples) < total:
        raise RuntimeError(f"{target.name} latency: {len(samples)}/{total} seen, {failure}")
    ordered = sorted(samples)
    return Latency(percentile(ordered, 50) / 1e6, percentile(ordered, 99) / 1e6,
                   percentile(ordered, 99.9) / 1e6, achieved)


def group_fetch(target: Target, topic: str, records: int, members: int = 3) -> Rate:
    group = fresh_topic("grp")
    counts = [0] * members
    start = threading.Barrier(members + 1)
    done = threading.Event()
    failure: list[BaseException] = []

    def member(i: int) -> None:
        c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, **CONSUMER,
                      "session.timeout.ms": 10_000})
        try:
            c.list_topics(topic, timeout=10)
            start.wait(30)
            c.subscribe([topic])
            while not done.is_set():
                for m in c.consume(1000, 0.1):
                    if m.error() is None:
                        counts[i] += 1
        except BaseException as exc:
            failure.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    start.wait(30)
    cpu0 = target.cpu_seconds()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while sum(counts) < records and not failure:
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    elapsed = time.perf_counter() - t0
    cpu = target.cpu_seconds() - cpu0
    done.set()
    for t in threads:
        t.join(30)
    if failure or sum(counts) < records:
        raise RuntimeError(f"{target.name} group fetch: {sum(counts)}/{records}, {failure}")
    return Rate(elapsed, sum(counts), sum(counts) * 100, cpu)


def metadata_time(target: Target, partitions_total: int, per_topic: int = 100,
                  repeats: int = 5) -> tuple[float, float]:
    """Create topics totalling ``partitions_total`` partitions; (seconds to create,
    median seconds of a full Metadata request by a fresh client)."""
    prefix = fresh_topic("meta")
    t0 = time.perf_counter()
    for i in range(partitions_total // per_topic):
        target.create_topic(f"{prefix}-{i}", per_topic)
    created = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        admin.list_topics(timeout=30)  # connected; the next call is timed alone
        t0 = time.perf_counter()
        meta = admin.list_topics(timeout=60)
        times.append(time.perf_counter() - t0)
        count = sum(len(t.partitions) for n, t in meta.topics.items() if n.startswith(prefix))
        if count != partitions_total:
            raise RuntimeError(f"{target.name} metadata: {count}/{partitions_total} partitions")
    for i in range(partitions_total // per_topic):
        target.delete_topic(f"{prefix}-{i}")
    times.sort()
    return created, times[len(times) // 2]

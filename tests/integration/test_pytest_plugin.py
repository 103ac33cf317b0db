"""The public pytest fixtures (``odradek_broker``, ``make_topic``), used as a
user's own test suite would use them: nothing here imports broker internals."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing.broker import Broker


def test_confluent_kafka_round_trip(odradek_broker: Broker, make_topic) -> None:  # type: ignore[no-untyped-def]
    topic = make_topic(partitions=3)
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    for i in range(30):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": odradek_broker.bootstrap_servers,
                         "group.id": "plugin-test", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    try:
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.add(msg.value())
            if len(got) == 30:
                break
    finally:
        consumer.close()
    assert got == {f"v{i}".encode() for i in range(30)}


def test_kafka_python_round_trip(odradek_broker: Broker, make_topic) -> None:  # type: ignore[no-untyped-def]
    topic = make_topic()
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers)
    for i in range(20):
        producer.send(topic, f"v{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=odradek_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        values = [m.value for m in itertools.islice(consumer, 20)]
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(20)]


def test_aiokafka_round_trip_on_the_session_broker(  # type: ignore[no-untyped-def]
    odradek_broker_session: Broker, make_topic
) -> None:
    topic = make_topic(partitions=2)

    async def run() -> list[bytes]:
        bootstrap = odradek_broker_session.bootstrap_servers
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"v{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                    auto_offset_reset="earliest", group_id="aio-plugin")
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(10):
                async for msg in consumer:
                    values.append(msg.value)
                    if len(values) == 10:
                        return values
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(10)]


def test_async_context_manager() -> None:
    async def run() -> str:
        async with Broker() as broker:
            broker.create_topic("from-async", partitions=2)
            return broker.bootstrap_servers

    assert asyncio.run(run()).startswith("127.0.0.1:")


_CYCLES = """
import os, threading
from odradek.testing.broker import Broker

def resources():
    return threading.active_count(), len(os.listdir("/proc/self/fd"))

with Broker() as warm:  # first use imports and caches what every later one shares
    warm.create_topic("warm")
before = resources()
data_dirs = []
for i in range(100):
    with Broker() as broker:
        broker.create_topic(f"t{i}", partitions=2)
        data_dirs.append(broker.data_dir)
after = resources()
assert after == before, (before, after, [t.name for t in threading.enumerate()])
assert not any(os.path.exists(d) for d in data_dirs)
print("ok")
"""


@pytest.mark.slow  # long for the fast tier (scripts/test.sh --fast)
def test_a_hundred_start_stop_cycles_leak_nothing() -> None:
    # In a fresh interpreter: brokers other tests left running here (the
    # session fixture's) start worker threads of their own at any moment.
    proc = subprocess.run([sys.executable, "-c", _CYCLES], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]

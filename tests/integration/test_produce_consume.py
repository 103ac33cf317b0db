"""Produce and consume with each real client, every codec, acks 0/1/all.

Every test writes 10,000 records with keys, headers and explicit timestamps and
reads them back with the same client's consumer: exactly the records sent, in
order within each partition.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker

N = 10_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = {"none": "all", "gzip": "1", "snappy": "0", "lz4": "all", "zstd": "1"}

Expected = dict[int, list[tuple[bytes, bytes, int, list[tuple[str, bytes]]]]]


@pytest.fixture(scope="module")
def shared_broker() -> Any:
    with Broker() as b:
        yield b


def _topic(b: Broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(10)


def _record(i: int, codec: str) -> tuple[bytes, bytes, int, list[tuple[str, bytes]]]:
    return (
        f"k{i}".encode(), f"{codec}-value-{i}-".encode() * 3, BASE_TS + i,
        [("seq", str(i).encode()), ("codec", codec.encode())],
    )


def _expected(codec: str) -> Expected:
    out: Expected = {p: [] for p in range(PARTITIONS)}
    for i in range(N):
        out[i % PARTITIONS].append(_record(i, codec))
    return out


def _check(got: Expected, codec: str) -> None:
    want = _expected(codec)
    for p in range(PARTITIONS):
        assert len(got[p]) == len(want[p]), f"partition {p}"
        assert got[p] == want[p], f"partition {p} differs"


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(shared_broker: Broker, codec: str) -> None:
    bs = shared_broker.bootstrap_servers
    topic = f"ck-{codec}"
    _topic(shared_broker, topic)
    acks = ACKS[codec]
    producer = Producer({
        "bootstrap.servers": bs, "compression.type": codec, "linger.ms": 5, "acks": acks,
        "enable.idempotence": acks == "all",
    })
    for i in range(N):
        key, value, ts, headers = _record(i, codec)
        producer.produce(topic, value, key, partition=i % PARTITIONS, timestamp=ts,
                         headers=headers)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: Expected = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    count = 0
    while count < N and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            assert m.error() is None, m.error()
            got[m.partition()].append(
                (m.key(), m.value(), m.timestamp()[1], [(k, v) for k, v in m.headers()])
            )
            count += 1
    consumer.close()
    _check(got, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(shared_broker: Broker, codec: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    bs = shared_broker.bootstrap_servers
    topic = f"kp-{codec}"
    _topic(shared_broker, topic)
    acks: Any = {"all": "all", "1": 1, "0": 0}[ACKS[codec]]
    producer = KafkaProducer(
        bootstrap_servers=bs, compression_type=None if codec == "none" else codec,
        acks=acks, linger_ms=5, enable_idempotence=acks == "all",
    )
    for i in range(N):
        key, value, ts, headers = _record(i, codec)
        producer.send(topic, value=value, key=key, partition=i % PARTITIONS,
                      timestamp_ms=ts, headers=headers)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    parts = [KTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    got: Expected = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    count = 0
    while count < N and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=1000, max_records=5000).items():
            for m in msgs:
                got[tp.partition].append((m.key, m.value, m.timestamp, list(m.headers)))
                count += 1
    consumer.close()
    _check(got, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(shared_broker: Broker, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    bs = shared_broker.bootstrap_servers
    topic = f"aio-{codec}"
    _topic(shared_broker, topic)
    acks: Any = {"all": "all", "1": 1, "0": 0}[ACKS[codec]]

    async def run() -> Expected:
        producer = AIOKafkaProducer(
            bootstrap_servers=bs, compression_type=None if codec == "none" else codec,
            acks=acks, linger_ms=5, enable_idempotence=acks == "all",
        )
        await producer.start()
        try:
            batch = []
            for i in range(N):
                key, value, ts, headers = _record(i, codec)
                batch.append(await producer.send(
                    topic, value=value, key=key, partition=i % PARTITIONS,
                    timestamp_ms=ts, headers=headers,
                ))
            await asyncio.gather(*batch)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
        await consumer.start()
        got: Expected = {p: [] for p in range(PARTITIONS)}
        try:
            parts = [ATopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            count = 0
            deadline = time.monotonic() + 60
            while count < N and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000, max_records=5000)
                for tp, msgs in batches.items():
                    for m in msgs:
                        got[tp.partition].append((m.key, m.value, m.timestamp, list(m.headers)))
                        count += 1
        finally:
            await consumer.stop()
        return got

    _check(asyncio.run(run()), codec)

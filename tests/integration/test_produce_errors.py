"""Produce-path errors and offset tools over real sockets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.records import Record, build_batch
from tests.support.rawclient import RawClient


def _create(b: Broker, name: str, partitions: int = 1, **config: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(10)
    return admin


def _produce(client: RawClient, topic: str, records: bytes, version: int = 9) -> int:
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(topic, [PartitionProduceData(0, records)])
    ])
    resp = client.request(req, version)
    code: int = resp.responses[0].partition_responses[0].error_code
    return code


def test_corrupt_crc_too_large_and_unknown_partition(broker: Broker) -> None:
    _create(broker, "errs", **{"max.message.bytes": "2000"})
    client = RawClient(broker.bootstrap_servers)
    try:
        good = build_batch([Record(0, 1, b"k", b"v")])
        assert _produce(client, "errs", good) == 0
        bad = bytearray(good)
        bad[-1] ^= 0xFF
        assert _produce(client, "errs", bytes(bad)) == ErrorCode.CORRUPT_MESSAGE
        big = build_batch([Record(0, 1, None, b"x" * 5000)])
        assert _produce(client, "errs", big) == ErrorCode.MESSAGE_TOO_LARGE
        assert _produce(client, "missing", good) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _produce(client, "errs", good[:30]) == ErrorCode.CORRUPT_MESSAGE
        # Produce v0-2 are advertised (librdkafka checks) but refused.
        assert _produce(client, "errs", good, version=2) == ErrorCode.UNSUPPORTED_VERSION
        # nothing bad was appended: only the two good batches are there
        assert _produce(client, "errs", good) == 0
    finally:
        client.close()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("errs", 0), timeout=10)
        assert (low, high) == (0, 2)
    finally:
        consumer.close()


def test_confluent_producer_reports_message_too_large(broker: Broker) -> None:
    _create(broker, "small", **{"max.message.bytes": "1000"})
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "message.max.bytes": 100000})
    producer.produce("small", b"x" * 5000, on_delivery=lambda err, _m: errors.append(str(err)))
    producer.flush(10)
    assert len(errors) == 1 and "MSG_SIZE_TOO_LARGE" in errors[0]


def test_offsets_for_times_seek_and_delete_records(broker: Broker) -> None:
    admin = _create(broker, "times", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 2})
    for i in range(200):
        producer.produce("times", str(i).encode(), partition=i % 2, timestamp=1_000_000 + i * 10)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "t",
                         "enable.auto.commit": False})
    try:
        # i = 100 has timestamp 1_001_000 and is the 50th record of partition 0
        found = consumer.offsets_for_times([TopicPartition("times", 0, 1_001_000),
                                            TopicPartition("times", 1, 1_001_000)], timeout=10)
        assert [tp.offset for tp in found] == [50, 50]
        # librdkafka merges a partition named twice, so the "after the end" case is its own call
        later = consumer.offsets_for_times([TopicPartition("times", 0, 9_999_999)], timeout=10)
        assert later[0].offset == -1
        consumer.assign([TopicPartition("times", 1, 90)])
        deadline = time.monotonic() + 10
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None and msg.offset() == 90 and msg.value() == b"181"
        from confluent_kafka import TopicPartition as TP

        result = admin.delete_records([TP("times", 0, 60)])
        for fut in result.values():
            assert fut.result(10).low_watermark == 60
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (60, 100)
        with pytest.raises(KafkaException):
            for fut in admin.delete_records([TP("times", 0, 500)]).values():
                fut.result(10)
    finally:
        consumer.close()


def test_kafka_python_offsets_for_times_and_end_offsets(broker: Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    _create(broker, "kpt")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(50):
        producer.send("kpt", str(i).encode(), timestamp_ms=5_000 + i)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        tp = KTP("kpt", 0)
        assert consumer.end_offsets([tp])[tp] == 50
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.offsets_for_times({tp: 5_020})[tp].offset == 20
    finally:
        consumer.close()

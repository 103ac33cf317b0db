"""Idempotent producers: retried batches are written once."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.records import Record, build_batch
from tests.support.proxy import Proxy
from tests.support.rawclient import RawClient


def _count(bootstrap: str, topic: str) -> list[bytes]:
    # no auto-commit: group coordination is not part of this test
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count",
                         "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < high and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None
                values.append(m.value())
        return values
    finally:
        consumer.close()


def test_librdkafka_retries_through_held_responses_write_no_duplicates() -> None:
    proxy = Proxy()
    # The broker advertises the proxy, so every connection of the client goes through it.
    broker = Broker(**{"advertised.listeners": f"PLAINTEXT://{proxy.address}"}).start()
    try:
        _retries_through_proxy(broker, proxy.start(broker.app.bound_address()))
    finally:
        proxy.close()
        broker.stop()


def _retries_through_proxy(broker: Broker, proxy: Proxy) -> None:
    # Made by the operator: only the producer's requests are what this test is
    # about (an AdminClient's CreateTopics through the proxy timed out, once in a
    # few loaded CI runs, before the test began).
    broker.create_topic("idem")
    delivered: list[bytes] = []
    errors: list[str] = []
    lock = threading.Lock()

    def on_delivery(err: object, msg: object) -> None:
        with lock:
            if err is None:
                delivered.append(msg.value())  # type: ignore[attr-defined]
            else:
                errors.append(str(err))

    producer = Producer({
        "bootstrap.servers": proxy.address, "enable.idempotence": True,
        # socket.timeout.ms is librdkafka's client-side request timeout
        "socket.timeout.ms": 1000, "request.timeout.ms": 500,
        "message.timeout.ms": 60000, "linger.ms": 5,
        "retry.backoff.ms": 50,
    })
    for i in range(200):
        producer.produce("idem", f"a{i}".encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(20) == 0
    connections_before = proxy.connections
    proxy.hold_responses.set()  # the broker appends, the client never hears back
    for i in range(300):
        producer.produce("idem", f"b{i}".encode(), partition=0, on_delivery=on_delivery)
    deadline = time.monotonic() + 3  # past socket.timeout.ms: requests time out
    while time.monotonic() < deadline:
        producer.poll(0.1)
    proxy.hold_responses.clear()
    assert producer.flush(30) == 0
    assert errors == []
    assert proxy.connections > connections_before  # it did reconnect and retry
    values = _count(proxy.address, "idem")
    expected = [f"a{i}".encode() for i in range(200)] + [f"b{i}".encode() for i in range(300)]
    assert values == expected  # every record once, in order
    assert sorted(delivered) == sorted(expected)


def _idempotent_producer(client: RawClient) -> tuple[int, int]:
    """A new idempotent producer id and epoch (InitProducerId, no transactional id)."""
    resp = client.request(InitProducerIdRequest(transactional_id=None,
                                                transaction_timeout_ms=60000), 4)
    assert resp.error_code == 0 and resp.producer_id >= 0
    return int(resp.producer_id), int(resp.producer_epoch)


def _produce_raw(client: RawClient, topic: str, values: list[bytes], producer_id: int,
                 producer_epoch: int, base_sequence: int) -> tuple[int, int]:
    """One acks=all batch of ``values`` to partition 0 of ``topic``, as the raw
    producer says: (error code, base offset) of the answer."""
    batch = build_batch([Record(i, 1, None, v) for i, v in enumerate(values)],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence)
    req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(topic, [PartitionProduceData(0, batch)])])
    p = client.request(req, 9).responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def test_duplicate_batch_is_acked_with_original_offset_and_gaps_are_refused(
    broker: Broker, caplog: pytest.LogCaptureFixture,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("seq", 1, 1)])["seq"].result(10)
    client = RawClient(broker.bootstrap_servers)
    try:
        pid, epoch = _idempotent_producer(client)

        def send(seq: int, n: int, e: int = epoch) -> tuple[int, int]:
            return _produce_raw(client, "seq", [b"v"] * n, pid, e, seq)

        assert send(0, 3) == (0, 0)
        assert send(3, 2) == (0, 3)
        assert send(0, 3) == (0, 0)  # duplicate: original offsets, not appended
        with caplog.at_level(logging.INFO, logger="odradek.broker"):
            assert send(9, 1)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # logged, with what was expected and the leader epoch, for tracing duplicates
        assert any("seq-0: Out of order sequence 9" in r.getMessage() and "expected 5" in
                   r.getMessage() and "leader epoch" in r.getMessage() for r in caplog.records)
        bumped = client.request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000,
            producer_id=pid, producer_epoch=epoch), 4)
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
        assert send(0, 1, epoch + 1) == (0, 5)
        assert send(5, 1, epoch)[0] == ErrorCode.INVALID_PRODUCER_EPOCH  # fenced zombie
    finally:
        client.close()
    assert len(_count(broker.bootstrap_servers, "seq")) == 6


def test_a_retried_batch_with_a_bad_crc_is_corrupt_not_a_duplicate(broker: Broker) -> None:
    """Kafka validates a batch before the producer-state check: a retry of an
    acknowledged batch whose bytes were damaged on the way gets CORRUPT_MESSAGE,
    and the log holds the batch once."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("crc", 1, 1)])["crc"].result(10)
    client = RawClient(broker.bootstrap_servers)
    try:
        pid_resp = client.request(InitProducerIdRequest(transactional_id=None,
                                                        transaction_timeout_ms=60000), 4)
        batch = build_batch([Record(i, 1, None, b"value") for i in range(3)],
                            producer_id=pid_resp.producer_id,
                            producer_epoch=pid_resp.producer_epoch, base_sequence=0)

        def send(records: bytes) -> tuple[int, int]:
            req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                TopicProduceData("crc", [PartitionProduceData(0, records)])])
            p = client.request(req, 9).responses[0].partition_responses[0]
            return p.error_code, p.base_offset

        assert send(batch) == (0, 0)
        damaged = bytearray(batch)
        damaged[-1] ^= 0xFF  # inside the CRC-covered records; same pid/epoch/sequence
        assert send(bytes(damaged))[0] == ErrorCode.CORRUPT_MESSAGE
        assert send(batch) == (0, 0)  # the intact retry is still a duplicate
    finally:
        client.close()
    assert _count(broker.bootstrap_servers, "crc") == [b"value"] * 3


def test_a_gap_after_a_refused_batch_is_answered_with_the_refusal(broker: Broker) -> None:
    """A producer's batch refused before the sequence check (NOT_ENOUGH_REPLICAS)
    is followed by its next batch, pipelined; if the cause ended in between, the
    next batch meets a gap. It is answered with the same retriable refusal, not
    OUT_OF_ORDER_SEQUENCE_NUMBER (on which librdkafka bumps its epoch and sends
    unacknowledged records again as new ones); retried in order, both are taken.
    A gap with no refusal before it is still OUT_OF_ORDER."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("gap", 1, 1)])["gap"].result(10)
    client = RawClient(broker.bootstrap_servers)
    try:
        pid, epoch = _idempotent_producer(client)

        def send(seq: int, producer: int | None = None) -> int:
            if producer is None:
                return _produce_raw(client, "gap", [f"v{seq}".encode()], pid, epoch, seq)[0]
            return _produce_raw(client, "gap", [f"v{seq}".encode()], producer, -1, -1)[0]

        def min_isr(value: str, then: int) -> None:
            """Set it, and wait until the partition applies it (a plain batch
            gets ``then``)."""
            res = ConfigResource(ConfigResource.Type.TOPIC, "gap", incremental_configs=[
                ConfigEntry("min.insync.replicas", value,
                            incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([res])[res].result(10)
            deadline = time.monotonic() + 10
            while (got := send(0, producer=-1)) != then:
                assert time.monotonic() < deadline, got
                time.sleep(0.05)

        assert send(0) == 0
        min_isr("2", then=ErrorCode.NOT_ENOUGH_REPLICAS)  # one replica, two asked for
        assert send(1) == ErrorCode.NOT_ENOUGH_REPLICAS
        min_isr("1", then=0)  # the cause ends before the pipelined next batch arrives
        assert send(2) == ErrorCode.NOT_ENOUGH_REPLICAS  # a gap after the refusal: not OOS
        assert send(1) == 0 and send(2) == 0  # the retries, in order
        assert send(5) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap of its own
    finally:
        client.close()

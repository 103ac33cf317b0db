"""Transactions with real clients (confluent-kafka, kafka-python, aiokafka) and
over the raw protocol: commit and abort as read_committed and read_uncommitted
consumers see them, offsets sent to a transaction, zombie fencing, the
coordinator's timeout, bad requests, and a restart with a transaction open.

Every read runs until a sentinel record produced last (see txnclients), and
every wait polls a condition against a deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.records import CONTROL_COMMIT, build_batch, control_record
from tests.integration.txnclients import (
    RawTxnProducer,
    high_watermark,
    lso,
    produce_raw,
    read_aiokafka,
    read_confluent,
    read_kafka_python,
    run_async,
    wait_until,
)

FAST_ABORTS: dict[str, Any] = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
"""The coordinator looks for timed-out transactions every 200 ms (Kafka: 10 s)."""
FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                KafkaError.INVALID_PRODUCER_EPOCH}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as br:
        yield br


def txn_producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def plain_produce(bootstrap: str, topic: str, value: bytes, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, partition=partition)
    assert producer.flush(20) == 0


def in_transaction(producer: Producer, topic: str, values: list[bytes], commit: bool) -> None:
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v, partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        assert producer.flush(20) == 0  # the records are in the log before the abort
        producer.abort_transaction(30)


def values_of(read: list[tuple[int, bytes]]) -> list[bytes]:
    return [v for _, v in read]


def b(*names: str) -> list[bytes]:
    return [n.encode() for n in names]


# -- 1. confluent-kafka: commit and abort ------------------------------------------------


def test_confluent_read_committed_skips_aborted_and_read_uncommitted_sees_gaps(
    broker: Broker,
) -> None:
    topic = "txn-basic"
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers
    producer = txn_producer(bs, "basic")
    in_transaction(producer, topic, b("c0", "c1", "c2"), commit=True)   # 0-2, COMMIT at 3
    in_transaction(producer, topic, b("a0", "a1", "a2"), commit=False)  # 4-6, ABORT at 7
    in_transaction(producer, topic, b("c3", "c4"), commit=True)         # 8-9, COMMIT at 10
    in_transaction(producer, topic, b("end"), commit=True)              # 11, COMMIT at 12
    wait_until(lambda: lso(bs, topic) == 13, 10, "the LSO past the last marker",
               lambda: (lso(bs, topic), high_watermark(bs, topic)))
    assert high_watermark(bs, topic) == 13

    committed = read_confluent(bs, topic, b"end", committed=True)
    assert committed == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (8, b"c3"), (9, b"c4"),
                         (11, b"end")]

    uncommitted = read_confluent(bs, topic, b"end", committed=False)
    assert uncommitted == [(0, b"c0"), (1, b"c1"), (2, b"c2"),
                           (4, b"a0"), (5, b"a1"), (6, b"a2"),
                           (8, b"c3"), (9, b"c4"), (11, b"end")]
    # the markers took offsets 3, 7, 10 and 12 and are never delivered


def test_interleaved_transactions_every_client_filters_only_the_aborted_one(
    broker: Broker,
) -> None:
    """Two producers' transactions interleaved batch by batch on one partition; one
    aborts, the other commits: aborted_transactions must name the aborted producer
    from its first offset, and each client's read_committed filter drops only it."""
    topic = "txn-interleaved"
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers
    pa, pb = txn_producer(bs, "interleave-a"), txn_producer(bs, "interleave-b")
    pa.begin_transaction()
    pb.begin_transaction()
    for producer, value in [(pa, b"a0"), (pb, b"b0"), (pa, b"a1"), (pb, b"b1"), (pa, b"a2")]:
        producer.produce(topic, value, partition=0)
        assert producer.flush(10) == 0  # one batch each, in this order: offsets 0-4
    pa.abort_transaction(30)
    pb.produce(topic, b"end", partition=0)
    pb.commit_transaction(30)
    expected = [(1, b"b0"), (3, b"b1"), (6, b"end")]
    assert read_confluent(bs, topic, b"end", committed=True) == expected
    assert read_kafka_python(bs, topic, b"end", committed=True) == expected
    assert run_async(read_aiokafka(bs, topic, b"end", committed=True)) == expected
    assert values_of(read_confluent(bs, topic, b"end", committed=False)) == b(
        "a0", "b0", "a1", "b1", "a2", "end")


# -- 2. consume-transform-produce --------------------------------------------------------


def _group_offset(admin: AdminClient, group: str, topic: str) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    result = futures[group].result(10)
    tp = result.topic_partitions[0]
    assert tp.error is None, tp.error
    offset: int = tp.offset
    return offset


def test_confluent_send_offsets_to_transaction_apply_on_commit_only(broker: Broker) -> None:
    src, dst, group = "ctp-in", "ctp-out", "ctp-group"
    broker.create_topic(src, 1)
    broker.create_topic(dst, 1)
    bs = broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": bs})
    for i in range(8):
        producer.produce(src, f"in{i}".encode(), partition=0)
    assert producer.flush(20) == 0
    admin = AdminClient({"bootstrap.servers": bs})
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    txn = txn_producer(bs, "ctp")
    try:
        consumer.subscribe([src])

        def take(n: int) -> list[bytes]:
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                for m in consumer.consume(n - len(got), 0.2):
                    assert m.error() is None, m.error()
                    got.append(m.value() or b"")
            assert len(got) == n, got
            return got

        # Round 1: 5 records in, transformed out, offsets with the transaction: commit.
        first = take(5)
        assert first == b("in0", "in1", "in2", "in3", "in4")
        txn.begin_transaction()
        for v in first:
            txn.produce(dst, v.upper(), partition=0)
        txn.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                        consumer.consumer_group_metadata(), 10)
        assert _group_offset(admin, group, src) < 0  # nothing committed before the commit
        txn.commit_transaction(30)
        wait_until(lambda: _group_offset(admin, group, src) == 5, 10,
                   "offset 5 committed by the transaction",
                   lambda: _group_offset(admin, group, src))

        # Round 2: 3 more, offsets with the transaction: abort.
        second = take(3)
        assert second == b("in5", "in6", "in7")
        txn.begin_transaction()
        for v in second:
            txn.produce(dst, v.upper(), partition=0)
        txn.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                        consumer.consumer_group_metadata(), 10)
        assert txn.flush(20) == 0
        txn.abort_transaction(30)
        # the abort is complete once a new transaction can end: its markers are written
        in_transaction(txn, dst, b("end"), commit=True)
        assert _group_offset(admin, group, src) == 5  # the aborted offsets were dropped
    finally:
        consumer.close()

    out = read_confluent(bs, dst, b"end", committed=True)
    assert values_of(out) == b("IN0", "IN1", "IN2", "IN3", "IN4", "end")
    # a fresh member of the group starts at the committed offset 5
    again = Consumer({"bootstrap.servers": bs, "group.id": group,
                      "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        committed = again.committed([TopicPartition(src, 0)], 10)
        assert committed[0].offset == 5
    finally:
        again.close()


# -- 3. zombie fencing -------------------------------------------------------------------


def test_confluent_second_producer_with_same_id_fences_the_first(broker: Broker) -> None:
    topic = "txn-zombie"
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers
    zombie = txn_producer(bs, "zombie")
    zombie.begin_transaction()
    zombie.produce(topic, b"z1", partition=0)
    assert zombie.flush(20) == 0  # z1 is in the log, in the zombie's open transaction
    assert high_watermark(bs, topic) == 1 and lso(bs, topic) == 0

    successor = txn_producer(bs, "zombie")  # aborts the zombie's transaction, bumps the epoch
    with pytest.raises(KafkaException) as info:
        zombie.produce(topic, b"z2", partition=0)
        zombie.commit_transaction(10)
    error = info.value.args[0]
    assert error.fatal() and error.code() in FENCED_CODES, error

    in_transaction(successor, topic, b("ok", "end"), commit=True)
    read = read_confluent(bs, topic, b"end", committed=True)
    assert values_of(read) == b("ok", "end")
    assert b"z1" in values_of(read_confluent(bs, topic, b"end", committed=False))


# -- 4. the coordinator's timeout --------------------------------------------------------


def test_coordinator_aborts_a_timed_out_transaction_and_fences_its_producer() -> None:
    with Broker(**FAST_ABORTS) as br:
        topic = "txn-timeout"
        br.create_topic(topic, 1)
        bs = br.bootstrap_servers
        stale = txn_producer(bs, "stale", **{"transaction.timeout.ms": 1000})
        began = time.monotonic()
        stale.begin_transaction()
        for v in b("s0", "s1", "s2"):
            stale.produce(topic, v, partition=0)
        assert stale.flush(10) == 0
        held = lso(bs, topic)
        assert time.monotonic() - began < 1, "too slow to see the transaction open"
        assert held == 0  # held by the open transaction

        # Another producer commits after it: invisible while the stale one holds the LSO,
        # visible once the coordinator has aborted the stale transaction.
        fresh = txn_producer(bs, "fresh")
        in_transaction(fresh, topic, b("f0", "end"), commit=True)
        wait_until(lambda: lso(bs, topic) == high_watermark(bs, topic), 15,
                   "the coordinator to abort the timed-out transaction",
                   lambda: (lso(bs, topic), high_watermark(bs, topic)))
        read = read_confluent(bs, topic, b"end", committed=True)
        assert values_of(read) == b("f0", "end")

        with pytest.raises(KafkaException) as info:
            stale.commit_transaction(10)
        error = info.value.args[0]
        assert error.fatal() and error.code() in FENCED_CODES, error


# -- 5. kafka-python ---------------------------------------------------------------------


def test_kafka_python_transactional_producer_commit_and_abort(broker: Broker) -> None:
    from kafka import KafkaProducer

    topic = "txn-kafka-python"
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id="kafka-python")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for v in b("c0", "c1"):
            producer.send(topic, v, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        for v in b("a0", "a1"):
            producer.send(topic, v, partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        for v in b("c2", "end"):
            producer.send(topic, v, partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)
    committed = read_kafka_python(bs, topic, b"end", committed=True)
    assert committed == [(0, b"c0"), (1, b"c1"), (6, b"c2"), (7, b"end")]
    uncommitted = read_kafka_python(bs, topic, b"end", committed=False)
    assert values_of(uncommitted) == b("c0", "c1", "a0", "a1", "c2", "end")
    assert [o for o, _ in uncommitted] == [0, 1, 3, 4, 6, 7]


# -- 6. aiokafka -------------------------------------------------------------------------


def test_aiokafka_transactional_producer_commit_and_abort(broker: Broker) -> None:
    from aiokafka import AIOKafkaProducer

    topic = "txn-aiokafka"
    broker.create_topic(topic, 1)
    bs = broker.bootstrap_servers

    async def run() -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for v in b("c0", "c1"):
                    await producer.send_and_wait(topic, v, partition=0)
            await producer.begin_transaction()
            for v in b("a0", "a1"):
                await producer.send_and_wait(topic, v, partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                for v in b("c2", "end"):
                    await producer.send_and_wait(topic, v, partition=0)
        finally:
            await producer.stop()
        committed = await read_aiokafka(bs, topic, b"end", committed=True)
        uncommitted = await read_aiokafka(bs, topic, b"end", committed=False)
        return committed, uncommitted

    committed, uncommitted = run_async(run())
    assert committed == [(0, b"c0"), (1, b"c1"), (6, b"c2"), (7, b"end")]
    assert values_of(uncommitted) == b("c0", "c1", "a0", "a1", "c2", "end")
    assert [o for o, _ in uncommitted] == [0, 1, 3, 4, 6, 7]


# -- 7. bad input over the raw protocol --------------------------------------------------


def test_raw_bad_transactional_requests_get_kafkas_errors(broker: Broker) -> None:
    topic = "txn-raw"
    broker.create_topic(topic, 2)
    bs = broker.bootstrap_servers
    txn = RawTxnProducer(bs, "raw")
    stranger = RawTxnProducer(bs, f"never-initialised-{uuid.uuid4()}")
    try:
        assert txn.init() == 0
        assert txn.init() == 0  # epoch bumped: there is an older epoch to send
        assert txn.epoch >= 1

        # EndTxn for an id the coordinator has never seen
        stranger.pid, stranger.epoch = txn.pid, txn.epoch
        assert stranger.end(commit=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # EndTxn with an older epoch: Kafka's spelling of "fenced" depends on the version
        for version, code in [(0, ErrorCode.INVALID_PRODUCER_EPOCH),
                              (1, ErrorCode.INVALID_PRODUCER_EPOCH),
                              (2, ErrorCode.PRODUCER_FENCED), (3, ErrorCode.PRODUCER_FENCED)]:
            got = txn.end(commit=True, version=version, epoch=txn.epoch - 1,
                          retry_concurrent=False)
            assert got == code, (version, got)

        # AddPartitionsToTxn naming an unknown topic: nothing is added
        assert txn.add_partitions({topic: [0, 1], "no-such-topic": [0]}) == {
            (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            (topic, 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        # ... so a transactional batch to either partition is not part of a transaction
        assert txn.produce(topic, 0, b("x"))[0] == ErrorCode.INVALID_TXN_STATE
        assert txn.produce(topic, 1, b("x"))[0] == ErrorCode.INVALID_TXN_STATE
        assert high_watermark(bs, topic, 0) == 0 and high_watermark(bs, topic, 1) == 0

        # Now add partition 0 only: a batch to 0 is accepted, one to 1 still is not.
        assert txn.add_partitions({topic: [0]}) == {(topic, 0): ErrorCode.NONE}
        # A control batch (transactional + control, 0x30) from a client is not a record
        # a producer may write, even for a partition in its transaction.
        marker = build_batch([control_record(CONTROL_COMMIT, offset=0,
                                             timestamp=int(time.time() * 1000))],
                             producer_id=txn.pid, producer_epoch=txn.epoch,
                             transactional=True, control=True)
        assert marker[21:23] == b"\x00\x30"  # attributes
        assert produce_raw(txn.client, topic, 0, marker, "raw")[0] == ErrorCode.INVALID_RECORD
        assert high_watermark(bs, topic, 0) == 0
        assert txn.produce(topic, 0, b("t0", "t1")) == (ErrorCode.NONE, 0)
        assert txn.produce(topic, 1, b("x"))[0] == ErrorCode.INVALID_TXN_STATE
        assert lso(bs, topic, 0) == 0 and high_watermark(bs, topic, 0) == 2
        assert txn.end(commit=False) == ErrorCode.NONE
        wait_until(lambda: lso(bs, topic, 0) == 3, 10, "the ABORT marker under the LSO")

        # InitProducerId asking for a timeout above transaction.max.timeout.ms (900000)
        too_long = RawTxnProducer(bs, "too-long", timeout_ms=900001)
        try:
            assert too_long.init() == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        finally:
            too_long.close()
    finally:
        txn.close()
        stranger.close()

    # The broker still serves an ordinary producer and consumer.
    plain_produce(bs, topic, b"after")
    plain_produce(bs, topic, b"end")
    assert read_confluent(bs, topic, b"end", committed=True) == [(3, b"after"), (4, b"end")]
    assert values_of(read_confluent(bs, topic, b"end", committed=False)) == b(
        "t0", "t1", "after", "end")


# -- 8. restart with a transaction open --------------------------------------------------


def test_restart_keeps_committed_records_and_the_open_transaction_until_it_times_out(
    tmp_path: Path,
) -> None:
    topic = "txn-restart"
    timeout_ms = 6000
    with Broker(data_dir=str(tmp_path), **FAST_ABORTS) as first:
        first.create_topic(topic, 1)
        bs = first.bootstrap_servers
        producer = txn_producer(bs, "restart-committed")
        in_transaction(producer, topic, b("c0", "c1"), commit=True)  # 0-1, COMMIT at 2
        wait_until(lambda: lso(bs, topic) == 3, 10, "the COMMIT marker under the LSO")
        # The open transaction over the raw protocol, so no client outlives the broker.
        open_txn = RawTxnProducer(bs, "restart-open", timeout_ms=timeout_ms)
        try:
            assert open_txn.init() == 0
            assert open_txn.add_partitions({topic: [0]}) == {(topic, 0): ErrorCode.NONE}
            started = time.monotonic()
            assert open_txn.produce(topic, 0, b("o0", "o1")) == (ErrorCode.NONE, 3)
            pid, epoch = open_txn.pid, open_txn.epoch
        finally:
            open_txn.close()
        assert lso(bs, topic) == 3 and high_watermark(bs, topic) == 5

    with Broker(data_dir=str(tmp_path), **FAST_ABORTS) as second:
        bs = second.bootstrap_servers
        held_lso = lso(bs, topic)
        assert time.monotonic() - started < timeout_ms / 1000, "restart took too long to check"
        assert held_lso == 3, "the open transaction no longer holds the LSO after the restart"
        assert high_watermark(bs, topic) == 5
        wait_until(lambda: lso(bs, topic) == 6, 20,
                   "the coordinator to abort the open transaction after its timeout",
                   lambda: (lso(bs, topic), high_watermark(bs, topic)))
        plain_produce(bs, topic, b"end")
        read = read_confluent(bs, topic, b"end", committed=True)
        assert read == [(0, b"c0"), (1, b"c1"), (6, b"end")]
        # the timed-out producer was fenced: its commit is refused
        late = RawTxnProducer(bs, "restart-open")
        try:
            late.pid, late.epoch = pid, epoch
            assert late.end(commit=True) == ErrorCode.INVALID_PRODUCER_EPOCH
        finally:
            late.close()

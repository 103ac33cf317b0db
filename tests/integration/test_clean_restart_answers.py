"""After a clean restart, logs no request has touched yet answer OffsetForLeaderEpoch,
DeleteRecords and read_committed fetches (aborted transactions found through the
start-up listing of each partition directory) as before the stop; a real broker
process, real clients."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.process import ServerProcess

RECORDS = 50


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"plain-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _transactions(bootstrap: str, topic: str, partition: int) -> None:
    """One aborted transaction of five records, then one committed of five."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "restart-tx"})
    producer.init_transactions(30)
    for outcome, prefix in ((producer.abort_transaction, "aborted"),
                            (producer.commit_transaction, "committed")):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{prefix}-{i}".encode(), partition=partition)
        assert producer.flush(30) == 0
        outcome(30)


def _read_committed(bootstrap: str, topic: str, partition: int, want: int) -> list[bytes]:
    """The values a read_committed consumer sees, until ``want`` of them (30 s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    out: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while len(out) < want and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                assert m.error() is None, m.error()
                out.append(m.value())
    finally:
        consumer.close()
    return out


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """The partition's (low, high) watermarks, asked by a fresh consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return low, high
    finally:
        consumer.close()


def _epoch_end(bootstrap: str, topic: str, partition: int, epoch: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch at the leader: (error code, leader epoch, end offset)."""
    from odradek.client.connection import Connection
    from odradek.wire.messages import offset_for_leader_epoch_request as ofl

    async def ask() -> tuple[int, int, int]:
        conn = await Connection.open(bootstrap, "restart-test", timeout_s=10)
        try:
            resp = await conn.request(ofl.OffsetForLeaderEpochRequest(-1, [
                ofl.OffsetForLeaderTopic(topic, [ofl.OffsetForLeaderPartition(
                    partition, -1, epoch)])]), 4, 2)
            p = resp.topics[0].partitions[0]
            return p.error_code, p.leader_epoch, p.end_offset
        finally:
            await conn.close()

    return asyncio.run(ask())


def test_untouched_logs_answer_epochs_delete_records_and_aborts_after_a_clean_restart(
        tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("clean", 3, 1)])["clean"].result(10)
        for p in (0, 1):
            _produce(server.bootstrap, "clean", p, RECORDS)
        _transactions(server.bootstrap, "clean", 2)
        before = _epoch_end(server.bootstrap, "clean", 0, 0)
        assert before == (0, 0, RECORDS)
        assert server.stop() == 0

        server.start()
        # Partition 0: its first request after the restart is OffsetForLeaderEpoch.
        assert _epoch_end(server.bootstrap, "clean", 0, 0) == before
        # Partition 1: DeleteRecords first, then the low watermark holds.
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        deleted = admin.delete_records([TopicPartition("clean", 1, 20)])
        low = next(iter(deleted.values())).result(10)
        assert low.low_watermark == 20
        assert _watermarks(server.bootstrap, "clean", 1) == (20, RECORDS)
        # Partition 2: a read_committed fetch skips the aborted transaction.
        committed = [f"committed-{i}".encode() for i in range(5)]
        assert _read_committed(server.bootstrap, "clean", 2, 5) == committed
        assert server.stop() == 0

        # The DeleteRecords start survives another clean restart.
        server.start()
        assert _watermarks(server.bootstrap, "clean", 1) == (20, RECORDS)
        assert _read_committed(server.bootstrap, "clean", 2, 5) == committed
    finally:
        server.kill()

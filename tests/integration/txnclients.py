"""Helpers for the transaction tests: reading a partition to a sentinel record
with each real client, the LSO and high watermark over the raw protocol, and a
raw transactional producer (InitProducerId, AddPartitionsToTxn, Produce, EndTxn).

Reading "until the sentinel" is what makes the read deterministic: the sentinel
is produced after everything the test looks at, so once a read_committed
consumer has it, every committed record before it has been delivered too and
anything missing was filtered by the broker or the client, not still in flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from odradek.wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from odradek.wire.messages.end_txn_request import EndTxnRequest
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from odradek.wire.messages.update_features_request import (
    FeatureUpdateKey,
    UpdateFeaturesRequest,
)
from odradek.wire.records import Record, build_batch
from tests.support.rawclient import RawClient

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
Read = list[tuple[int, bytes]]
"""(offset, value) of each delivered record, in delivery order."""


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


def end_offset(bootstrap: str, topic: str, partition: int, isolation: int) -> int:
    """ListOffsets(latest): the LSO for read_committed, the high watermark otherwise."""
    client = RawClient(bootstrap)
    try:
        resp = client.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation,
            topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(partition, -1, -1)])]), 4)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0, p
        offset: int = p.offset
        return offset
    finally:
        client.close()


def lso(bootstrap: str, topic: str, partition: int = 0) -> int:
    return end_offset(bootstrap, topic, partition, READ_COMMITTED)


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    return end_offset(bootstrap, topic, partition, READ_UNCOMMITTED)


def _done(got: Read, sentinel: bytes, what: str, timeout_s: float) -> Read:
    if not any(v == sentinel for _, v in got):
        raise AssertionError(f"{what}: no {sentinel!r} within {timeout_s} s; got {got}")
    return got


def read_confluent(
    bootstrap: str, topic: str, sentinel: bytes, *, committed: bool,
    partition: int = 0, timeout_s: float = 20,
) -> Read:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
    })
    got: Read = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        while not any(v == sentinel for _, v in got) and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, m.error()
                got.append((m.offset() or 0, m.value() or b""))
    finally:
        consumer.close()
    return _done(got, sentinel, "confluent-kafka", timeout_s)


def read_kafka_python(
    bootstrap: str, topic: str, sentinel: bytes, *, committed: bool,
    partition: int = 0, timeout_s: float = 20,
) -> Read:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted")
    got: Read = []
    try:
        consumer.assign([KTopicPartition(topic, partition)])
        deadline = time.monotonic() + timeout_s
        while not any(v == sentinel for _, v in got) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.value) for r in records)
    finally:
        consumer.close()
    return _done(got, sentinel, "kafka-python", timeout_s)


async def read_aiokafka(
    bootstrap: str, topic: str, sentinel: bytes, *, committed: bool,
    partition: int = 0, timeout_s: float = 20,
) -> Read:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted")
    await consumer.start()
    got: Read = []
    try:
        tp = ATopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout_s
        while not any(v == sentinel for _, v in got) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                got.extend((r.offset, r.value) for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return _done(got, sentinel, "aiokafka", timeout_s)


def set_transaction_version(bootstrap: str, level: int) -> None:
    """UpdateFeatures: finalize ``transaction.version`` at ``level`` (a downgrade
    is a safe one), as ``odradek features upgrade|downgrade`` does."""
    client = RawClient(bootstrap)
    try:
        resp = client.request(UpdateFeaturesRequest(feature_updates=[FeatureUpdateKey(
            "transaction.version", level, upgrade_type=2)]), 1)
        assert resp.error_code == 0, resp
    finally:
        client.close()


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


class RawTxnProducer:
    """A transactional producer spoken over the raw protocol, one request at a time."""

    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000) -> None:
        self.client = RawClient(bootstrap)
        self.tid = transactional_id
        self.timeout_ms = timeout_ms
        self.pid, self.epoch = -1, -1
        self.sequences: dict[tuple[str, int], int] = {}
        self.last_end: tuple[int, int] = (-1, -1)
        """The producer id and epoch of the last EndTxn answer (-1, -1: keep yours)."""

    def init(self, version: int = 1) -> int:
        """InitProducerId, retried while the coordinator answers CONCURRENT_TRANSACTIONS."""
        deadline = time.monotonic() + 15
        while True:
            resp = self.client.request(InitProducerIdRequest(
                transactional_id=self.tid, transaction_timeout_ms=self.timeout_ms), version)
            if resp.error_code != 51 or time.monotonic() > deadline:  # CONCURRENT_TRANSACTIONS
                break
            time.sleep(0.05)
        if resp.error_code == 0:
            self.pid, self.epoch = resp.producer_id, resp.producer_epoch
            self.sequences.clear()
        code: int = resp.error_code
        return code

    def add_partitions(
        self, topics: dict[str, list[int]], version: int = 1, epoch: int | None = None,
    ) -> dict[tuple[str, int], int]:
        resp = self.client.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()],
        ), version)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}

    def produce(self, topic: str, partition: int, values: list[bytes], version: int = 9,
                epoch: int | None = None, sequence: int | None = None) -> tuple[int, int]:
        """A transactional batch (Produce ``version``; v12 adds the partition to a
        transactions v2 transaction); (error code, base offset). ``epoch`` and
        ``sequence`` replace the producer's (a zombie's late batch)."""
        seq = self.sequences.get((topic, partition), 0) if sequence is None else sequence
        now = int(time.time() * 1000)
        batch = build_batch([Record(i, now, None, v) for i, v in enumerate(values)],
                            producer_id=self.pid,
                            producer_epoch=self.epoch if epoch is None else epoch,
                            base_sequence=seq, transactional=True)
        code, base = produce_raw(self.client, topic, partition, batch, self.tid, version)
        if code == 0 and epoch is None:
            self.sequences[(topic, partition)] = seq + len(values)
        return code, base

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int],
                       version: int = 5) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit (v5 adds the group to a transactions v2 transaction)."""
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for (topic, index), offset in offsets.items():
            by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(
                partition_index=index, committed_offset=offset))
        resp = self.client.request(TxnOffsetCommitRequest(
            transactional_id=self.tid, group_id=group, producer_id=self.pid,
            producer_epoch=self.epoch,
            topics=[TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()]), version)
        return {(t.name, q.partition_index): q.error_code for t in resp.topics
                for q in t.partitions}

    def end(self, commit: bool, version: int = 1, epoch: int | None = None,
            retry_concurrent: bool = True) -> int:
        deadline = time.monotonic() + 15
        while True:
            resp = self.client.request(EndTxnRequest(
                transactional_id=self.tid, producer_id=self.pid,
                producer_epoch=self.epoch if epoch is None else epoch, committed=commit),
                version)
            if not (retry_concurrent and resp.error_code == 51) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        code: int = resp.error_code
        self.last_end = (resp.producer_id, resp.producer_epoch)
        if code == 0 and resp.producer_id >= 0:  # transactions v2: the bumped epoch
            if (resp.producer_id, resp.producer_epoch) != (self.pid, self.epoch):
                self.sequences.clear()
            self.pid, self.epoch = resp.producer_id, resp.producer_epoch
        return code

    def close(self) -> None:
        self.client.close()


def produce_raw(
    client: RawClient, topic: str, partition: int, batch: bytes,
    transactional_id: str | None = None, version: int = 9,
) -> tuple[int, int]:
    """One batch in one Produce (v9 unless told; acks=-1); (error code, base offset)."""
    resp = client.request(ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, batch)])]),
        version)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset

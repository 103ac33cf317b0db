"""Kafka 4.0's transaction API versions over a real socket, answered as a
cluster with ``transaction.version`` 1 finalized answers them (transactions
v1; each test's broker is set to level 1 with UpdateFeatures first, a new
cluster finalizes 2 — transactions v2 is tests/integration/test_transactions_v2.py):
InitProducerId 5, AddPartitionsToTxn 4-5 (the broker-to-broker batch with
``verify_only``), AddOffsetsToTxn 4, TxnOffsetCommit 4-5, EndTxn 4-5, Produce 12.

No installed client sends these versions (librdkafka 2.16: AddPartitionsToTxn
and AddOffsetsToTxn 0, EndTxn 1, TxnOffsetCommit 3, InitProducerId 4;
kafka-python 3 caps its transaction requests at v3-4; aiokafka lower), so they
are sent with the project's encoder. Each test checks Kafka's answer for the
case it names."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from odradek.wire.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from odradek.wire.messages.end_txn_request import EndTxnRequest
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
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
from odradek.wire.records import Record, build_batch
from tests.integration.txnclients import (
    RawTxnProducer,
    high_watermark,
    lso,
    set_transaction_version,
    wait_until,
)
from tests.support.rawclient import RawClient

TOPIC = "k40-txn"
GROUP = "k40-group"
E = ErrorCode


@pytest.fixture
def producers(broker: Broker) -> Iterator[list[RawTxnProducer]]:
    """Transactional producers of this test (closed after it); the topic exists and
    ``transaction.version`` is 1 (transactions v1)."""
    broker.create_topic(TOPIC, partitions=2)
    set_transaction_version(broker.bootstrap_servers, 1)
    made: list[RawTxnProducer] = []
    yield made
    for p in made:
        p.close()


def _producer(broker: Broker, made: list[RawTxnProducer], tid: str, version: int = 5
              ) -> RawTxnProducer:
    p = RawTxnProducer(broker.bootstrap_servers, tid)
    made.append(p)
    assert p.init(version) == 0
    return p


# -- InitProducerId 5 -----------------------------------------------------------------


def test_init_producer_id_v5_bumps_the_epoch_and_fences(
    broker: Broker, producers: list[RawTxnProducer]
) -> None:
    first = _producer(broker, producers, "ip5")
    assert first.pid >= 0 and first.epoch == 0
    second = _producer(broker, producers, "ip5")
    assert (second.pid, second.epoch) == (first.pid, first.epoch + 1)
    assert first.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): E.PRODUCER_FENCED}
    # without a transactional id: an idempotent producer's fresh id, epoch 0
    idempotent = second.client.request(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000), 5)
    assert idempotent.error_code == 0 and idempotent.producer_epoch == 0
    assert idempotent.producer_id not in (-1, first.pid)


# -- AddPartitionsToTxn 4-5 (broker to broker) ----------------------------------------


def _batch_add(client: RawClient, version: int,
               transactions: list[tuple[str, int, int, bool, dict[str, list[int]]]]
               ) -> dict[str, dict[tuple[str, int], int]]:
    resp = client.request(AddPartitionsToTxnRequest(transactions=[
        AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
            topics=[AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()])
        for tid, pid, epoch, verify, topics in transactions]), version)
    assert resp.error_code == 0
    return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in resp.results_by_transaction}


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_v4_v5_verify_only(
    broker: Broker, producers: list[RawTxnProducer], version: int
) -> None:
    p = _producer(broker, producers, f"verify-{version}")
    other = _producer(broker, producers, f"other-{version}")
    assert p.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): 0}
    answers = _batch_add(p.client, version, [
        (p.tid, p.pid, p.epoch, True, {TOPIC: [0, 1]}),
        ("nobody", 4242, 0, True, {TOPIC: [0]}),
        (other.tid, other.pid, other.epoch + 1, True, {TOPIC: [0]}),
        ("missing-topic", p.pid, p.epoch, True, {"no-such-topic": [0], TOPIC: [1]}),
    ])
    assert answers == {
        # partition 1 was never added: Kafka's coordinator answers TRANSACTION_ABORTABLE
        # (at v4 too: Kafka converts it only for the producer's own request versions)
        p.tid: {(TOPIC, 0): 0, (TOPIC, 1): E.TRANSACTION_ABORTABLE},
        "nobody": {(TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING},
        other.tid: {(TOPIC, 0): E.PRODUCER_FENCED},
        "missing-topic": {("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                          (TOPIC, 1): E.OPERATION_NOT_ATTEMPTED},
    }
    # verification changed nothing: a batch to partition 1 is still refused
    assert p.produce(TOPIC, 1, [b"x"])[0] == E.INVALID_TXN_STATE  # Produce v9


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_v4_v5_adds_without_verify_only(
    broker: Broker, producers: list[RawTxnProducer], version: int
) -> None:
    p = _producer(broker, producers, f"add-{version}")
    added = _batch_add(p.client, version, [(p.tid, p.pid, p.epoch, False, {TOPIC: [0, 1]})])
    assert added == {p.tid: {(TOPIC, 0): 0, (TOPIC, 1): 0}}
    again = _batch_add(p.client, version, [(p.tid, p.pid, p.epoch, True, {TOPIC: [0, 1]})])
    assert again == {p.tid: {(TOPIC, 0): 0, (TOPIC, 1): 0}}
    assert p.produce(TOPIC, 1, [b"in"])[0] == 0
    assert p.end(commit=True, version=3) == 0
    wait_until(lambda: lso(broker.bootstrap_servers, TOPIC, 1) == 2, 15, "the commit marker")


# -- AddOffsetsToTxn 4, TxnOffsetCommit 5, EndTxn 5: one whole transaction ----------


def _txn_commit(p: RawTxnProducer, version: int, offset: int) -> dict[tuple[str, int], int]:
    resp = p.client.request(TxnOffsetCommitRequest(
        transactional_id=p.tid, group_id=GROUP, producer_id=p.pid, producer_epoch=p.epoch,
        topics=[TxnOffsetCommitRequestTopic(TOPIC, [
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]),
        version)
    return {(t.name, q.partition_index): q.error_code for t in resp.topics for q in t.partitions}


def _end(p: RawTxnProducer, version: int, commit: bool, epoch: int | None = None) -> Any:
    return p.client.request(EndTxnRequest(
        transactional_id=p.tid, producer_id=p.pid,
        producer_epoch=p.epoch if epoch is None else epoch, committed=commit), version)


def _committed_offset(client: RawClient) -> int:
    resp = client.request(OffsetFetchRequest(
        group_id=GROUP, topics=[OffsetFetchRequestTopic(TOPIC, [0])], require_stable=True), 7)
    [part] = resp.topics[0].partitions
    if part.error_code == E.UNSTABLE_OFFSET_COMMIT:  # the marker is not in yet
        return -2
    assert part.error_code == 0
    offset: int = part.committed_offset
    return offset


def test_a_transaction_at_kafka_40s_versions_stays_on_transactions_v1(
    broker: Broker, producers: list[RawTxnProducer]
) -> None:
    p = _producer(broker, producers, "whole-v5")
    epoch = p.epoch
    assert p.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): 0}
    assert p.produce(TOPIC, 0, [b"a", b"b"])[0] == 0
    added = p.client.request(AddOffsetsToTxnRequest(
        transactional_id=p.tid, producer_id=p.pid, producer_epoch=p.epoch, group_id=GROUP), 4)
    assert added.error_code == 0
    assert _txn_commit(p, 5, 2) == {(TOPIC, 0): 0}
    ended = _end(p, 5, commit=True)
    # the transactions-v1 answer: no new producer id or epoch (Kafka's TV1 path)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, -1, -1)
    wait_until(lambda: _committed_offset(p.client) == 2, 15, "the committed group offset")
    assert lso(broker.bootstrap_servers, TOPIC, 0) == high_watermark(broker.bootstrap_servers,
                                                                      TOPIC, 0) == 3
    # v1: the next transaction runs at the same epoch (no bump per transaction)
    assert p.epoch == epoch
    assert p.add_partitions({TOPIC: [1]}, version=3) == {(TOPIC, 1): 0}
    assert _end(p, 5, commit=False).error_code == 0


@pytest.mark.parametrize(("version", "expected"), [
    (3, E.INVALID_TXN_STATE), (4, E.TRANSACTION_ABORTABLE), (5, E.TRANSACTION_ABORTABLE)])
def test_txn_offset_commit_for_a_group_outside_the_transaction(
    broker: Broker, producers: list[RawTxnProducer], version: int, expected: ErrorCode
) -> None:
    p = _producer(broker, producers, f"no-offsets-{version}")
    assert p.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): 0}
    # no AddOffsetsToTxn: under transactions v1 a v5 commit does not add the group
    assert _txn_commit(p, version, 1) == {(TOPIC, 0): expected}


@pytest.mark.parametrize("version", [4, 5])
def test_end_txn_v4_v5_answers(
    broker: Broker, producers: list[RawTxnProducer], version: int
) -> None:
    p = _producer(broker, producers, f"end-{version}")
    assert _end(p, version, commit=True).error_code == E.INVALID_TXN_STATE  # none open
    assert p.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): 0}
    assert _end(p, version, commit=True, epoch=p.epoch - 1).error_code == E.PRODUCER_FENCED
    done = _end(p, version, commit=True)
    assert (done.error_code, done.producer_id, done.producer_epoch) == (0, -1, -1)
    deadline = time.monotonic() + 15
    while (retry := _end(p, version, commit=True)).error_code == E.CONCURRENT_TRANSACTIONS:
        assert time.monotonic() < deadline, "markers never finished"
        time.sleep(0.02)
    assert retry.error_code == 0  # a retried commit of a committed transaction
    assert _end(p, version, commit=False).error_code == E.INVALID_TXN_STATE


# -- Produce 12 --------------------------------------------------------------------------


def _produce_v12(p: RawTxnProducer, partition: int, value: bytes) -> tuple[int, int]:
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)],
                        producer_id=p.pid, producer_epoch=p.epoch,
                        base_sequence=p.sequences.get((TOPIC, partition), 0), transactional=True)
    resp = p.client.request(ProduceRequest(transactional_id=p.tid, acks=-1, timeout_ms=5000,
                                           topic_data=[TopicProduceData(TOPIC, [
                                               PartitionProduceData(partition, batch)])]), 12)
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_produce_v12_transactional_batches_are_verified_not_added(
    broker: Broker, producers: list[RawTxnProducer]
) -> None:
    p = _producer(broker, producers, "produce-v12")
    assert p.add_partitions({TOPIC: [0]}, version=3) == {(TOPIC, 0): 0}
    assert _produce_v12(p, 0, b"in") == (0, 0)
    # Kafka's transactions v2 would add partition 1 here; for a v1 client it is
    # verified, and it was never added
    assert _produce_v12(p, 1, b"out") == (E.TRANSACTION_ABORTABLE, -1)
    assert p.end(commit=True, version=3) == 0

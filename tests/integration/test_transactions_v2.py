"""Transactions v2 (KIP-890 part 2) over real sockets, spoken by the project's
raw transactional producer as Kafka 4.0's Java producer speaks it once
``transaction.version`` 2 is finalized: no AddPartitionsToTxn or
AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 add them), EndTxn v5,
whose answer carries the bumped epoch the next transaction uses.

A read-process-write loop commits its output and its input offsets
atomically; a zombie's batch at an ended transaction's epoch, sent after the
EndTxn, is refused and never seen by a read_committed consumer; the feature
level is what ApiVersions reports and survives a restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.integration.txnclients import (
    RawTxnProducer,
    high_watermark,
    lso,
    read_confluent,
    set_transaction_version,
    wait_until,
)
from tests.support.rawclient import RawClient

E = ErrorCode
IN, OUT, GROUP = "v2-in", "v2-out", "v2-group"


def finalized(bootstrap: str) -> tuple[dict[str, int], int]:
    """ApiVersions v4: the finalized feature levels and their epoch."""
    client = RawClient(bootstrap)
    try:
        resp = client.request(ApiVersionsRequest(client_software_name="odradek-tests",
                                                 client_software_version="1"), 4)
        levels = {f.name: f.max_version_level for f in resp.finalized_features}
        epoch: int = resp.finalized_features_epoch
        return levels, epoch
    finally:
        client.close()


@pytest.fixture
def producer(broker: Broker) -> Iterator[RawTxnProducer]:
    """A transactions v2 producer (InitProducerId v5) on a new cluster."""
    broker.create_topic(IN, partitions=1)
    broker.create_topic(OUT, partitions=2)
    p = RawTxnProducer(broker.bootstrap_servers, f"rpw-{uuid.uuid4()}")
    assert p.init(5) == 0
    yield p
    p.close()


def committed_offset(bootstrap: str) -> int:
    """The group's committed offset of IN-0 (-2 while a transaction holds it)."""
    client = RawClient(bootstrap)
    try:
        resp = client.request(OffsetFetchRequest(
            group_id=GROUP, topics=[OffsetFetchRequestTopic(IN, [0])], require_stable=True), 7)
        [part] = resp.topics[0].partitions
        if part.error_code == E.UNSTABLE_OFFSET_COMMIT:
            return -2
        assert part.error_code == 0
        offset: int = part.committed_offset
        return offset
    finally:
        client.close()


def test_a_new_cluster_finalizes_transaction_version_2(broker: Broker) -> None:
    levels, epoch = finalized(broker.bootstrap_servers)
    assert levels == {"metadata.version": 25, "group.version": 1, "transaction.version": 2}
    assert epoch >= 1


def test_read_process_write_loop_on_transactions_v2(
    broker: Broker, producer: RawTxnProducer
) -> None:
    bootstrap = broker.bootstrap_servers
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        source.produce(IN, f"in-{i}".encode(), partition=0)
    assert source.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(IN, 0, 0)])
    pid, epoch = producer.pid, producer.epoch
    position = 0
    try:
        for round_ in range(3):  # two input records per transaction
            batch: list[bytes] = []
            while len(batch) < 2:
                for m in consumer.consume(2 - len(batch), 5.0):
                    assert m.error() is None, m.error()
                    batch.append(m.value() or b"")
            position += len(batch)
            out = [v.replace(b"in", b"out") for v in batch]
            # Produce v12 adds OUT-(round % 2) to the transaction: no AddPartitionsToTxn
            assert producer.produce(OUT, round_ % 2, out, version=12)[0] == 0
            # TxnOffsetCommit v5 adds the group: no AddOffsetsToTxn
            assert producer.commit_offsets(GROUP, {(IN, 0): position}) == {(IN, 0): 0}
            assert producer.end(commit=True, version=5) == 0
            # the answer carries the bumped epoch, which the next transaction uses
            assert (producer.pid, producer.epoch) == (pid, epoch + round_ + 1)
    finally:
        consumer.close()
    wait_until(lambda: committed_offset(bootstrap) == 6, 15, "the committed input offset")
    got = read_all_committed(broker, 2)
    assert sorted(got) == [f"out-{i}".encode() for i in range(6)]


def read_all_committed(broker: Broker, partitions: int) -> list[bytes]:
    """Every committed record of OUT (read_committed, up to each partition's LSO
    once it has caught up with the high watermark: no transaction open)."""
    bootstrap = broker.bootstrap_servers
    values: list[bytes] = []
    for index in range(partitions):
        wait_until(lambda index=index: lso(bootstrap, OUT, index) == high_watermark(
            bootstrap, OUT, index), 15, f"{OUT}-{index}'s markers")
        if high_watermark(bootstrap, OUT, index) == 0:
            continue
        sentinel = f"end-{index}".encode()
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce(OUT, sentinel, partition=index)
        assert plain.flush(20) == 0
        got = read_confluent(bootstrap, OUT, sentinel, committed=True, partition=index)
        values += [v for _, v in got if v != sentinel]
    return values


def test_a_zombies_late_write_is_fenced_and_never_read(
    broker: Broker, producer: RawTxnProducer
) -> None:
    old_epoch = producer.epoch
    assert producer.produce(OUT, 0, [b"txn-1"], version=12)[0] == 0
    assert producer.end(commit=True, version=5) == 0
    assert producer.epoch == old_epoch + 1
    # once transaction 1's marker is in (before it, a batch of transaction 1 is
    # still part of it: Kafka's partition takes it without asking), the zombie
    # (the same producer at the ended transaction's epoch) sends late
    bootstrap = broker.bootstrap_servers
    wait_until(lambda: lso(bootstrap, OUT, 0) == high_watermark(bootstrap, OUT, 0), 15,
               "transaction 1's marker")
    late = producer.produce(OUT, 0, [b"zombie"], version=12, epoch=old_epoch, sequence=1)
    assert late == (E.INVALID_PRODUCER_EPOCH, -1)
    # ... also once the next transaction is open, on the partition it writes to
    assert producer.produce(OUT, 0, [b"txn-2"], version=12)[0] == 0
    late = producer.produce(OUT, 0, [b"zombie-2"], version=12, epoch=old_epoch, sequence=1)
    assert late == (E.INVALID_PRODUCER_EPOCH, -1)
    late = producer.produce(OUT, 1, [b"zombie-3"], version=12, epoch=old_epoch, sequence=0)
    assert late == (E.INVALID_PRODUCER_EPOCH, -1)
    assert producer.end(commit=True, version=5) == 0
    assert producer.epoch == old_epoch + 2
    assert sorted(read_all_committed(broker, 2)) == [b"txn-1", b"txn-2"]


def test_end_txn_v5_retries_and_aborts_bump_the_epoch(
    broker: Broker, producer: RawTxnProducer
) -> None:
    epoch = producer.epoch
    assert producer.produce(OUT, 0, [b"kept"], version=12)[0] == 0
    assert producer.end(commit=True, version=5) == 0
    # the answer was lost: the retry at the old epoch gets the same new epoch
    assert producer.end(commit=True, version=5, epoch=epoch) == 0
    assert producer.last_end == (producer.pid, epoch + 1)
    # the other result at the old epoch is refused; an older epoch is fenced
    assert producer.end(commit=False, version=5, epoch=epoch) == E.INVALID_TXN_STATE
    assert producer.end(commit=True, version=5, epoch=epoch - 1) == E.PRODUCER_FENCED
    # an abort bumps too, and its records are never read
    assert producer.produce(OUT, 1, [b"dropped"], version=12)[0] == 0
    assert producer.end(commit=False, version=5) == 0
    assert producer.epoch == epoch + 2
    assert read_all_committed(broker, 2) == [b"kept"]


def test_a_v1_client_keeps_its_epoch_on_a_v2_cluster(
    broker: Broker, producer: RawTxnProducer
) -> None:
    epoch = producer.epoch
    assert producer.add_partitions({OUT: [0]}, version=3) == {(OUT, 0): 0}
    assert producer.produce(OUT, 0, [b"v1"])[0] == 0  # Produce v9
    assert producer.end(commit=True, version=4) == 0  # EndTxn v4: transactions v1
    assert producer.last_end == (-1, -1) and producer.epoch == epoch
    assert read_all_committed(broker, 1) == [b"v1"]


def test_transaction_version_survives_a_restart(tmp_path: object) -> None:
    data = str(tmp_path)
    with Broker(data_dir=data) as first:
        assert finalized(first.bootstrap_servers)[0]["transaction.version"] == 2
        set_transaction_version(first.bootstrap_servers, 1)
        levels, epoch = finalized(first.bootstrap_servers)
        assert levels["transaction.version"] == 1
    with Broker(data_dir=data) as again:
        assert finalized(again.bootstrap_servers)[0]["transaction.version"] == 1
        # a v5 EndTxn now ends as transactions v1 does
        again.create_topic(OUT, partitions=1)
        p = RawTxnProducer(again.bootstrap_servers, "after-restart")
        try:
            assert p.init(5) == 0
            assert p.add_partitions({OUT: [0]}, version=3) == {(OUT, 0): 0}
            assert p.end(commit=True, version=5) == 0
            assert p.last_end == (-1, -1)
        finally:
            p.close()
    assert epoch >= 2

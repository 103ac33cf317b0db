"""Transaction admin APIs against a real broker: DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66) and WriteTxnMarkers (27),
with state made by librdkafka's transactional producer; answered to the raw
protocol, to kafka-python's KafkaAdminClient and to the ``odradek
transactions`` / ``odradek topics describe --producers`` commands, including
aborting a hanging transaction by hand (KIP-664) so read_committed readers
move past it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from odradek.wire.messages.describe_transactions_request import DescribeTransactionsRequest
from odradek.wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from odradek.wire.messages.list_transactions_request import ListTransactionsRequest
from odradek.wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from tests.support.rawclient import RawClient

LONG_TIMEOUT_MS = 600_000
"""Hanging transactions must not be aborted by the coordinator's timer meanwhile."""


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(num_partitions="1") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        futures = admin.create_topics([NewTopic(t, n, 1) for t, n in (
            ("txa-committed", 1), ("txa-hanging", 2), ("txa-kp", 1), ("txa-bad", 1))])
        for f in futures.values():
            f.result(30)
        yield b


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawClient]:
    client = RawClient(broker.bootstrap_servers)
    yield client
    client.close()


def _producer(broker: Broker, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid,
                  "transaction.timeout.ms": LONG_TIMEOUT_MS})
    p.init_transactions(30)
    return p


def _commit(broker: Broker, tid: str, topic: str, values: list[bytes],
            partition: int = 0) -> None:
    p = _producer(broker, tid)
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=partition)
    p.commit_transaction(30)
    _wait_for_state(broker, tid, "CompleteCommit")


def _wait_for_state(broker: Broker, tid: str, state: str) -> None:
    """EndTxn answers once PrepareX is written; the markers and CompleteX follow."""
    raw = RawClient(broker.bootstrap_servers)
    try:
        deadline = time.monotonic() + 10
        while _describe(raw, tid).transaction_state != state:
            assert time.monotonic() < deadline, f"{tid} never reached {state}"
            time.sleep(0.05)
    finally:
        raw.close()


def _hang(broker: Broker, tid: str, topic: str, values: list[bytes],
          partition: int = 0) -> Producer:
    """A producer whose transaction is begun and written to, never ended."""
    p = _producer(broker, tid)
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0
    return p


def _producers(raw: RawClient, topic: str, partition: int) -> list:  # type: ignore[type-arg]
    resp = raw.request(DescribeProducersRequest(topics=[
        TopicRequest(name=topic, partition_indexes=[partition])]), 0)
    (p,) = resp.topics[0].partitions
    assert p.error_code == 0, p
    return list(p.active_producers)


def _describe(raw: RawClient, tid: str):  # type: ignore[no-untyped-def]
    resp = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
    (state,) = resp.transaction_states
    return state


def _list(raw: RawClient, version: int = 1, **filters: object):  # type: ignore[no-untyped-def]
    resp = raw.request(ListTransactionsRequest(**filters), version)  # type: ignore[arg-type]
    assert resp.error_code == 0
    return resp


def _lso(raw: RawClient, topic: str, partition: int) -> int:
    resp = raw.request(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[
        ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsPartition(partition_index=partition, timestamp=-1)])]), 7)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.offset)


def _read_committed(broker: Broker, topic: str, partition: int, want: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "txa",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < want and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                if m.error() is None:
                    values.append(m.value())
        # a little longer: nothing else (aborted records) may arrive
        for m in consumer.consume(100, 1.0):
            if m.error() is None:
                values.append(m.value())
        return values
    finally:
        consumer.close()


def odradek(broker: Broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "odradek", *args, "--bootstrap-server",
           broker.bootstrap_servers]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def fails(broker: Broker, *args: str) -> str:
    proc = odradek(broker, *args, ok=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- the raw protocol -------------------------------------------------------------------


def test_committed_transaction_described(broker: Broker, raw: RawClient) -> None:
    _commit(broker, "txa-c", "txa-committed", [b"a", b"b", b"c"])
    state = _describe(raw, "txa-c")
    assert state.error_code == 0 and state.transaction_state == "CompleteCommit"
    assert state.transaction_timeout_ms == LONG_TIMEOUT_MS
    assert state.producer_id >= 0 and state.producer_epoch == 0
    assert state.transaction_start_time_ms > 0
    assert state.topics == []  # a completed transaction holds no partitions

    (prod,) = [p for p in _producers(raw, "txa-committed", 0)
               if p.producer_id == state.producer_id]
    assert prod.producer_epoch == 0
    assert prod.last_sequence == 2  # three records, sequences 0..2
    assert prod.current_txn_start_offset == -1  # the COMMIT marker closed it
    assert prod.coordinator_epoch == 0
    assert prod.last_timestamp > 0

    listed = _list(raw, 0).transaction_states
    assert ("txa-c", state.producer_id, "CompleteCommit") in [
        (t.transactional_id, t.producer_id, t.transaction_state) for t in listed]


def test_ongoing_transaction_and_list_filters(broker: Broker, raw: RawClient) -> None:
    p = _hang(broker, "txa-o", "txa-hanging", [b"x", b"y"], partition=1)
    try:
        state = _describe(raw, "txa-o")
        assert state.error_code == 0 and state.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in state.topics] == [("txa-hanging", [1])]
        pid = state.producer_id

        (prod,) = [s for s in _producers(raw, "txa-hanging", 1) if s.producer_id == pid]
        assert prod.current_txn_start_offset == 0
        assert prod.last_sequence == 1
        assert prod.coordinator_epoch == -1  # no marker yet

        ongoing = _list(raw, state_filters=["Ongoing"]).transaction_states
        assert [t.transactional_id for t in ongoing] == ["txa-o"]
        by_pid = _list(raw, producer_id_filters=[pid]).transaction_states
        assert [(t.transactional_id, t.transaction_state) for t in by_pid] == [
            ("txa-o", "Ongoing")]
        assert _list(raw, producer_id_filters=[pid + 10_000]).transaction_states == []

        unknown = _list(raw, state_filters=["Ongoing", "Bogus"])
        assert unknown.unknown_state_filters == ["Bogus"]
        assert [t.transactional_id for t in unknown.transaction_states] == ["txa-o"]
        only_unknown = _list(raw, state_filters=["ongoing"])  # names are case-sensitive
        assert only_unknown.unknown_state_filters == ["ongoing"]
        assert only_unknown.transaction_states == []

        # v1: only transactions running longer than the duration filter
        assert "txa-o" in [t.transactional_id for t in _list(
            raw, producer_id_filters=[pid], duration_filter=0).transaction_states]
        assert _list(raw, producer_id_filters=[pid],
                     duration_filter=3_600_000).transaction_states == []
    finally:
        p.abort_transaction(30)
    _wait_for_state(broker, "txa-o", "CompleteAbort")
    (prod,) = [s for s in _producers(raw, "txa-hanging", 1) if s.producer_id == pid]
    assert prod.current_txn_start_offset == -1 and prod.coordinator_epoch == 0


def test_unknown_transactional_id(raw: RawClient) -> None:
    state = _describe(raw, "txa-never-seen")
    assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert state.transactional_id == "txa-never-seen"
    assert _describe(raw, "").error_code == ErrorCode.INVALID_REQUEST


def test_describe_producers_unknown_partition(raw: RawClient) -> None:
    resp = raw.request(DescribeProducersRequest(topics=[
        TopicRequest(name="txa-no-such-topic", partition_indexes=[0]),
        TopicRequest(name="txa-committed", partition_indexes=[7, 0]),
    ]), 0)
    codes = {(t.name, p.partition_index): p.error_code
             for t in resp.topics for p in t.partitions}
    assert codes == {
        ("txa-no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("txa-committed", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("txa-committed", 0): ErrorCode.NONE,
    }


def test_write_txn_markers_bad_input(broker: Broker, raw: RawClient) -> None:
    resp = raw.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=4242, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="txa-no-such-topic", partition_indexes=[0]),
                WritableTxnMarkerTopic(name="txa-bad", partition_indexes=[5])],
    )]), 1)
    (marker,) = resp.markers
    assert marker.producer_id == 4242
    codes = {(t.name, p.partition_index): p.error_code
             for t in marker.topics for p in t.partitions}
    assert codes == {("txa-no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("txa-bad", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    # the coordinator's own ABORT marker (coordinator epoch 0) is on the partition:
    # a marker from an older coordinator epoch is fenced, one from the same is not
    p = _hang(broker, "txa-fence", "txa-bad", [b"e"])
    pid = _describe(raw, "txa-fence").producer_id
    p.abort_transaction(30)
    _wait_for_state(broker, "txa-fence", "CompleteAbort")
    (entry,) = [s for s in _producers(raw, "txa-bad", 0) if s.producer_id == pid]
    assert entry.coordinator_epoch == 0
    resp = raw.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=False, coordinator_epoch=-1,
        topics=[WritableTxnMarkerTopic(name="txa-bad", partition_indexes=[0])])]), 1)
    assert resp.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    resp = raw.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="txa-bad", partition_indexes=[0])])]), 1)
    assert resp.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE


def test_write_txn_markers_stale_epoch(broker: Broker, raw: RawClient) -> None:
    first = _hang(broker, "txa-stale", "txa-bad", [b"s"])
    pid = _describe(raw, "txa-stale").producer_id
    # a new instance fences the old one: its transaction is aborted at epoch 1
    second = _producer(broker, "txa-stale")
    del first
    deadline = time.monotonic() + 10
    while True:
        entry = [s for s in _producers(raw, "txa-bad", 0) if s.producer_id == pid]
        if entry and entry[0].producer_epoch >= 1:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    resp = raw.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="txa-bad", partition_indexes=[0])])]), 1)
    assert resp.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH)
    del second


# -- aborting a hanging transaction with the CLI ----------------------------------------


def test_cli_abort_of_hanging_transaction(broker: Broker, raw: RawClient) -> None:
    topic = "txa-hanging"
    _commit(broker, "txa-before", topic, [b"before"])
    hanging = _hang(broker, "txa-h", topic, [b"lost-1", b"lost-2", b"lost-3"])
    try:
        start = 2  # "before" at 0, its COMMIT marker at 1
        assert _lso(raw, topic, 0) == start
        assert _read_committed(broker, topic, 0, 1) == [b"before"]

        listed = json.loads(odradek(broker, "transactions", "list", "--json").stdout)
        (row,) = [t for t in listed if t["transactional_id"] == "txa-h"]
        assert row["state"] == "Ongoing" and row["coordinator"] >= 0
        pid = row["producer_id"]
        table = odradek(broker, "transactions", "list", "--state", "Ongoing").stdout
        assert "TRANSACTIONAL-ID" in table and "txa-h" in table and "txa-before" not in table

        desc = json.loads(odradek(broker, "transactions", "describe", "txa-h",
                                  "--json").stdout)
        assert desc["state"] == "Ongoing" and desc["producer_id"] == pid
        assert desc["coordinator"] == row["coordinator"]
        assert desc["producer_epoch"] == 0 and desc["timeout_ms"] == LONG_TIMEOUT_MS
        assert desc["partitions"] == [{"topic": topic, "partition": 0, "start_offset": start}]
        assert desc["duration_ms"] >= 0
        text = odradek(broker, "transactions", "describe", "txa-h").stdout
        assert "Ongoing" in text and f"{topic}-0@{start}" in text and "--start-offset" in text
        # held by its coordinator: not hanging, however old
        assert json.loads(odradek(broker, "transactions", "find-hanging", "--topic", topic,
                                  "--max-transaction-timeout", "0", "--json").stdout) == []

        (described,) = json.loads(odradek(broker, "topics", "describe", topic, "--producers",
                                          "--json").stdout)
        parts = {p["partition"]: p for p in described["partitions"]}
        (mine,) = [s for s in parts[0]["producers"] if s["producer_id"] == pid]
        assert mine["current_txn_start_offset"] == start
        assert mine["producer_epoch"] == 0 and mine["last_sequence"] == 2
        text = odradek(broker, "topics", "describe", topic, "--producers").stdout
        assert "CurrentTxnStartOffset" in text and str(pid) in text

        out = odradek(broker, "transactions", "abort", "--topic", topic, "--partition", "0",
                      "--producer-id", str(pid), "--producer-epoch", "0",
                      "--coordinator-epoch", str(mine["coordinator_epoch"])).stdout
        assert f"producer {pid}" in out

        # the LSO moves past the aborted records and the marker
        assert _lso(raw, topic, 0) == start + 4
        (after,) = [s for s in _producers(raw, topic, 0) if s.producer_id == pid]
        assert after.current_txn_start_offset == -1
        _commit(broker, "txa-after", topic, [b"after"])
        assert _read_committed(broker, topic, 0, 2) == [b"before", b"after"]
    finally:
        del hanging


def test_cli_abort_by_start_offset(broker: Broker, raw: RawClient) -> None:
    topic = "txa-hanging"
    hanging = _hang(broker, "txa-h2", topic, [b"gone"], partition=1)
    try:
        pid = _describe(raw, "txa-h2").producer_id
        (mine,) = [s for s in _producers(raw, topic, 1) if s.producer_id == pid]
        start = mine.current_txn_start_offset
        assert _lso(raw, topic, 1) == start
        fails_line = fails(broker, "transactions", "abort", "--topic", topic, "--partition",
                           "1", "--start-offset", str(start + 100))
        assert "no open transaction starts at offset" in fails_line
        out = json.loads(odradek(broker, "transactions", "abort", "--topic", topic,
                                 "--partition", "1", "--start-offset", str(start),
                                 "--json").stdout)
        assert out["producer_id"] == pid and out["aborted"] is True
        assert _lso(raw, topic, 1) == start + 2
    finally:
        del hanging


def test_find_hanging_lists_what_no_coordinator_holds(tmp_path: Path) -> None:
    """A real hanging transaction: its coordinator's state is lost (an operator
    deletes ``__transaction_state``, which only the recovery setting allows,
    and restarts the broker) while the transaction is open. find-hanging lists
    it with its start offset, abort --start-offset closes it, and the last
    stable offset moves on."""
    settings = {"num_partitions": "1", "odradek.allow.internal.topic.changes": "true"}
    with Broker(data_dir=str(tmp_path), **settings) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("txh", 1, 1)])["txh"].result(30)
        hanging = _hang(b, "txh-lost", "txh", [b"x1", b"x2"])
        raw = RawClient(b.bootstrap_servers)
        pid = _describe(raw, "txh-lost").producer_id
        raw.close()
        assert json.loads(odradek(b, "transactions", "find-hanging", "--max-transaction-"
                                  "timeout", "0", "--json").stdout) == []
        odradek(b, "topics", "delete", "__transaction_state")
    with Broker(data_dir=str(tmp_path), **settings) as b:
        raw = RawClient(b.bootstrap_servers)
        try:
            (row,) = json.loads(odradek(b, "transactions", "find-hanging",
                                        "--max-transaction-timeout", "0", "--json").stdout)
            assert row["topic"] == "txh" and row["partition"] == 0
            assert row["producer_id"] == pid and row["start_offset"] == 0
            # older than the default 15 minutes only: not listed without the bound
            assert json.loads(odradek(b, "transactions", "find-hanging", "--json").stdout) == []
            table = odradek(b, "transactions", "find-hanging", "--topic", "txh",
                            "--max-transaction-timeout", "0").stdout
            assert "START-OFFSET" in table and "--start-offset" in table
            assert _lso(raw, "txh", 0) == 0
            odradek(b, "transactions", "abort", "--topic", "txh", "--partition", "0",
                    "--start-offset", str(row["start_offset"]))
            assert _lso(raw, "txh", 0) == 3  # past the two records and the marker
            assert json.loads(odradek(b, "transactions", "find-hanging",
                                      "--max-transaction-timeout", "0", "--json").stdout) == []
            assert "must not be negative" in fails(b, "transactions", "find-hanging",
                                                   "--max-transaction-timeout", "-1")
        finally:
            raw.close()
    del hanging  # (it spoke to the first broker; gone before it could end anything)


def test_cli_errors(broker: Broker) -> None:
    assert "TRANSACTIONAL_ID_NOT_FOUND" in fails(
        broker, "transactions", "describe", "txa-never-seen")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails(
        broker, "topics", "describe", "txa-no-such-topic", "--producers")
    assert "has no partition 9" in fails(
        broker, "transactions", "abort", "--topic", "txa-bad", "--partition", "9",
        "--producer-id", "1", "--producer-epoch", "0", "--coordinator-epoch", "0")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails(
        broker, "transactions", "abort", "--topic", "txa-no-such-topic", "--partition", "0",
        "--producer-id", "1", "--producer-epoch", "0", "--coordinator-epoch", "0")
    assert "--coordinator-epoch" in fails(
        broker, "transactions", "abort", "--topic", "txa-bad", "--partition", "0",
        "--producer-id", "1", "--producer-epoch", "0")
    assert "not both" in fails(
        broker, "transactions", "abort", "--topic", "txa-bad", "--partition", "0",
        "--start-offset", "0", "--producer-id", "1")
    assert "unknown transaction state(s): Bogus" in fails(
        broker, "transactions", "list", "--state", "Bogus")
    proc = odradek(broker, "transactions", "frobnicate", ok=False)
    assert proc.returncode == 2


# -- kafka-python's admin client ---------------------------------------------------------


def test_kafka_python_admin(broker: Broker, raw: RawClient) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import TransactionalIdNotFoundError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        for name in ("describe_transactions", "list_transactions", "describe_producers"):
            if not hasattr(admin, name):
                pytest.skip(f"kafka-python has no KafkaAdminClient.{name}")
        hanging = _hang(broker, "txa-kp", "txa-kp", [b"k1", b"k2"])
        try:
            (desc,) = admin.describe_transactions(["txa-kp"]).values()
            assert str(getattr(desc.state, "value", desc.state)) == "Ongoing"
            assert desc.topic_partitions == {KTopicPartition("txa-kp", 0)}
            assert desc.transaction_timeout_ms == LONG_TIMEOUT_MS
            pid = desc.producer_id

            listed = admin.list_transactions(state_filters=["Ongoing"])
            ids = [t.transactional_id for ts in listed.values() for t in ts]
            assert "txa-kp" in ids

            states = admin.describe_producers([KTopicPartition("txa-kp", 0)])
            (mine,) = [s for s in states[KTopicPartition("txa-kp", 0)].active_producers
                       if s.producer_id == pid]
            assert mine.current_transaction_start_offset == 0
            assert _lso(raw, "txa-kp", 0) == 0

            if hasattr(admin, "abort_transaction"):
                from kafka.admin import AbortTransactionSpec

                admin.abort_transaction(AbortTransactionSpec(
                    KTopicPartition("txa-kp", 0), pid, mine.producer_epoch,
                    mine.coordinator_epoch))
                assert _lso(raw, "txa-kp", 0) == 3
        finally:
            del hanging
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["txa-never-seen"])
    finally:
        admin.close()

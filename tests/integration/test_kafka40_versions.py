"""Kafka 4.0 version parity, over a real socket: the ApiVersions answer covers
Kafka 4.0's range for every API Odradek serves (``tests/kafka40_api_versions.py``
says where those ranges come from), kafka-python infers Kafka 4.0 from it, and
the new versions of Produce, Fetch, ListOffsets and Metadata are sent and their
answers checked against what Kafka 4.0 answers on a single node."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from odradek.wire.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from odradek.wire.messages.fetch_response import FetchResponse, PartitionData
from odradek.wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from odradek.wire.messages.list_offsets_response import ListOffsetsPartitionResponse
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.produce_response import LeaderIdAndEpoch, ProduceResponse
from odradek.wire.records import Record, build_batch, decode_batches
from tests.integration.txnclients import RawTxnProducer
from tests.kafka40_api_versions import BROKER as KAFKA40
from tests.kafka40_api_versions import CONTROLLER_MAX
from tests.support.rawclient import RawClient

TOPIC = "k40"


@pytest.fixture
def client(broker: Broker) -> Iterator[RawClient]:
    broker.create_topic(TOPIC, partitions=2)
    c = RawClient(broker.bootstrap_servers)
    try:
        yield c
    finally:
        c.close()


def _batch(values: list[bytes], ts: int | None = None) -> bytes:
    now = int(time.time() * 1000) if ts is None else ts
    return build_batch([Record(i, now + i, None, v) for i, v in enumerate(values)])


def _produce_v9(
    client: RawClient, partition: int, values: list[bytes], ts: int | None = None
) -> int:
    resp = client.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(TOPIC, [PartitionProduceData(partition, _batch(values, ts))])]), 9)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0
    base: int = p.base_offset
    return base


def _topic_id(client: RawClient, name: str = TOPIC) -> uuid.UUID:
    resp = client.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)]), 12)
    topic_id: uuid.UUID = resp.topics[0].topic_id
    assert topic_id.int != 0
    return topic_id


# Kafka 4.0 broker APIs that Odradek does not serve, and why. Serving one means
# taking it out of here (the test below then checks its range).
NOT_SERVED: dict[int, str] = {
    38: "CreateDelegationToken: delegation tokens are a non-goal (DESIGN.md)",
    39: "RenewDelegationToken: delegation tokens are a non-goal",
    40: "ExpireDelegationToken: delegation tokens are a non-goal",
    41: "DescribeDelegationToken: delegation tokens are a non-goal",
    64: "UnregisterBroker: brokers leave by being fenced",
    74: "ListClientMetricsResources: client telemetry is a non-goal (DESIGN.md)",
}

# Served below Kafka 4.0's range, or not yet (empty since the KIP-848 consumer
# protocol landed). The test fails while a key is listed but already covered,
# so the list cannot go stale.
PENDING: dict[int, str] = {}


def _answered_ranges(broker: Broker) -> dict[int, tuple[int, int]]:
    client = RawClient(broker.bootstrap_servers)
    try:
        resp = client.request(ApiVersionsRequest(client_software_name="odradek-tests",
                                                 client_software_version="1"), 4)
    finally:
        client.close()
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def _covers(ours: tuple[int, int] | None, kafka: tuple[int, int]) -> bool:
    return ours is not None and ours[0] <= kafka[0] and ours[1] >= kafka[1]


def test_every_served_api_covers_kafka_40s_range(broker: Broker) -> None:
    ranges = _answered_ranges(broker)  # over a real socket, ApiVersions v4
    short = {key: (ranges.get(key), kafka) for key, kafka in KAFKA40.items()
             if key not in NOT_SERVED and key not in PENDING
             and not _covers(ranges.get(key), kafka)}
    assert short == {}
    for key, top in CONTROLLER_MAX.items():
        assert ranges[key][1] >= top, key
    # every API we serve is one Kafka 4.0 serves, on a broker or a controller listener
    assert set(ranges) <= set(KAFKA40) | set(CONTROLLER_MAX)
    assert ranges[0] == (0, 12)  # v0-2 still advertised (KAFKA-18659), rejected when sent


def test_not_served_and_pending_lists_are_accurate(broker: Broker) -> None:
    ranges = _answered_ranges(broker)
    assert not set(NOT_SERVED) & set(PENDING)
    assert [key for key in NOT_SERVED if key in ranges] == []
    assert set(NOT_SERVED) <= set(KAFKA40)
    # a pending key that is covered by now must leave PENDING
    assert [key for key in PENDING if _covers(ranges.get(key), KAFKA40[key])] == []


def test_kafka_python_infers_kafka_40(broker: Broker) -> None:
    # kafka-python 3's KafkaClient (kafka.net.compat.KafkaNetClient) infers the
    # broker version from the ApiVersions ranges: (4, 0) needs ListOffsets v10
    # and rules out (4, 1) (Produce v13), (4, 2) and (4, 3).
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert client.check_version() == (4, 0)
    finally:
        client.close()


# -- ListOffsets ---------------------------------------------------------------


def _list_offsets(
    client: RawClient, version: int, timestamp: int, partition: int = 0, **kw: int
) -> ListOffsetsPartitionResponse:
    resp = client.request(ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(TOPIC, [ListOffsetsPartition(partition, -1, timestamp)])], **kw), version)
    assert resp.topics[0].name == TOPIC
    p: ListOffsetsPartitionResponse = resp.topics[0].partitions[0]
    return p


def test_list_offsets_v8_to_v10_earliest_local_and_latest_tiered(client: RawClient) -> None:
    now = int(time.time() * 1000)
    _produce_v9(client, 0, [b"a", b"b", b"c"], now - 10_000)
    _produce_v9(client, 0, [b"d", b"e"], now)  # "e" has the largest timestamp
    resp = client.request(DeleteRecordsRequest(topics=[
        DeleteRecordsTopic(TOPIC, [DeleteRecordsPartition(0, 2)])], timeout_ms=5000), 2)
    assert resp.topics[0].partitions[0].error_code == 0
    for version in (8, 9, 10):
        # -4, earliest local: with no tiered storage, the log start offset (like -2)
        local = _list_offsets(client, version, -4, timeout_ms=1000)
        earliest = _list_offsets(client, version, -2, timeout_ms=1000)
        assert (local.error_code, local.offset, local.timestamp) == (0, 2, -1)
        assert local.leader_epoch == earliest.leader_epoch
        latest = _list_offsets(client, version, -1, timeout_ms=1000)
        assert (latest.error_code, latest.offset) == (0, 5)
        max_ts = _list_offsets(client, version, -3)
        assert (max_ts.error_code, max_ts.offset) == (0, 4)
    for version in (9, 10):
        # -5, latest tiered: Kafka without remote storage answers -1/-1/-1, no error
        tiered = _list_offsets(client, version, -5, timeout_ms=0)
        assert (tiered.error_code, tiered.offset, tiered.timestamp, tiered.leader_epoch) == (
            0, -1, -1, -1)
    # an empty partition: -4 is 0, -5 still -1
    empty = _list_offsets(client, 10, -4, partition=1, timeout_ms=1000)
    assert (empty.error_code, empty.offset) == (0, 0)


@pytest.mark.parametrize(("version", "timestamp"), [(6, -3), (7, -4), (8, -5), (10, -6)])
def test_list_offsets_sentinel_newer_than_version_is_unsupported(
    client: RawClient, version: int, timestamp: int
) -> None:
    assert _list_offsets(client, version, timestamp).error_code == ErrorCode.UNSUPPORTED_VERSION


def test_list_offsets_v10_unknown_partition(client: RawClient) -> None:
    p = _list_offsets(client, 10, -1, partition=7, timeout_ms=500)
    assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- Produce -------------------------------------------------------------------


def _produce(
    client: RawClient, version: int, partitions: dict[int, bytes | None],
    topic: str = TOPIC, transactional_id: str | None = None,
) -> ProduceResponse:
    resp: ProduceResponse = client.request(ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            TopicProduceData(topic, [PartitionProduceData(i, b) for i, b in partitions.items()])
        ]), version)
    return resp


@pytest.mark.parametrize("version", [10, 11, 12])
def test_produce_v10_v11_append_with_default_leader_hints(client: RawClient, version: int) -> None:
    resp = _produce(client, version, {0: _batch([b"x", b"y"]), 1: _batch([b"z"])})
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, 0, 0), (1, 0, 0)]
    assert all(p.current_leader == LeaderIdAndEpoch(-1, -1) for p in parts)
    assert resp.node_endpoints == []
    again = _produce(client, version, {0: _batch([b"w"])}).responses[0].partition_responses[0]
    assert (again.error_code, again.base_offset, again.log_start_offset) == (0, 2, 0)


@pytest.mark.parametrize("version", [10, 11, 12])
def test_produce_v10_v11_errors_other_than_not_leader_carry_no_hints(
    client: RawClient, version: int
) -> None:
    resp = _produce(client, version, {9: _batch([b"x"])})
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert p.current_leader == LeaderIdAndEpoch(-1, -1)
    assert resp.node_endpoints == []


@pytest.mark.parametrize("version", [9, 10, 11, 12])
def test_produce_not_leader_carries_leader_hints_from_v10(
    broker: Broker, client: RawClient, version: int
) -> None:
    # One node leads everything, so make the partition layer of partition 1 believe
    # another broker leads it: the metadata image still names this node.
    state = broker.app.state
    assert state is not None
    part = state.partitions.get(TOPIC, 1)
    assert part is not None
    image_p = state.image.topics[TOPIC].partitions[1]
    local = part.state.leader_id
    part.state.leader_id = local + 100
    try:
        resp = _produce(client, version, {0: _batch([b"ok"]), 1: _batch([b"x"])})
    finally:
        part.state.leader_id = local
    ok, moved = resp.responses[0].partition_responses
    assert ok.error_code == 0
    assert moved.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    if version >= 10:
        assert moved.current_leader == LeaderIdAndEpoch(image_p.leader, image_p.leader_epoch)
        assert ok.current_leader == LeaderIdAndEpoch(-1, -1)
        assert [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints] == [
            (image_p.leader, host, int(port), None)]
    else:  # not on the wire before v10: decoded as defaults
        assert moved.current_leader == LeaderIdAndEpoch(-1, -1)
        assert resp.node_endpoints == []


@pytest.mark.parametrize(("version", "expected"), [
    (9, ErrorCode.INVALID_TXN_STATE), (10, ErrorCode.INVALID_TXN_STATE),
    (11, ErrorCode.TRANSACTION_ABORTABLE), (12, ErrorCode.NONE),
])
def test_produce_transactional_batch_outside_the_transaction(
    broker: Broker, client: RawClient, version: int, expected: ErrorCode
) -> None:
    txn = RawTxnProducer(broker.bootstrap_servers, f"tid-{version}")
    try:
        assert txn.init() == 0
        batch = build_batch([Record(0, int(time.time() * 1000), None, b"t")],
                            producer_id=txn.pid, producer_epoch=txn.epoch, base_sequence=0,
                            transactional=True)
        # partition 0 was never added to the transaction: refused, except that
        # v12 on a cluster at transaction.version 2 (a new one) adds it itself
        resp = _produce(client, version, {0: batch}, transactional_id=txn.tid)
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == expected
        assert (p.base_offset >= 0) if expected == ErrorCode.NONE else p.base_offset == -1
        assert resp.node_endpoints == []
        if expected == ErrorCode.NONE:  # end it (transactions v2: EndTxn v5)
            assert txn.end(commit=False, version=5) == 0
    finally:
        txn.close()



# -- Fetch ---------------------------------------------------------------------


def _fetch(
    client: RawClient, version: int, topics: list[FetchTopic], **kw: Any
) -> FetchResponse:
    resp: FetchResponse = client.request(FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=topics, **kw), version)
    assert resp.error_code == 0 and resp.session_id == 0
    return resp


def _values(p: PartitionData) -> list[bytes | None]:
    return [r.value for _, records in decode_batches(bytes(p.records or b"")) for r in records]


def _fp(partition: int, offset: int = 0) -> FetchPartition:
    return FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_v13_plus_by_topic_id(client: RawClient, version: int) -> None:
    _produce_v9(client, 0, [b"a", b"b"])
    _produce_v9(client, 1, [b"c"])
    topic_id = _topic_id(client)
    unknown = uuid.uuid4()
    kw: dict[str, Any] = {}
    if version >= 15:
        kw["replica_state"] = ReplicaState(replica_id=-1, replica_epoch=-1)
    fp = [_fp(0), _fp(1, 1), _fp(5)]
    if version >= 17:
        fp[0].replica_directory_id = uuid.uuid4()  # a follower's field; ignored
    resp = _fetch(client, version, [
        FetchTopic(topic_id=topic_id, partitions=fp),
        FetchTopic(topic_id=unknown, partitions=[_fp(0), _fp(1)]),
    ], forgotten_topics_data=[ForgottenTopic(topic_id=unknown, partitions=[3])], **kw)
    known, missing = resp.responses
    assert (known.topic_id, known.topic) == (topic_id, "")  # no name on the wire at v13+
    p0, p1, p5 = known.partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark, p0.log_start_offset) == (
        0, 0, 2, 0)
    assert _values(p0) == [b"a", b"b"]
    assert (p1.error_code, p1.high_watermark, _values(p1)) == (0, 1, [])
    assert (p5.partition_index, p5.error_code) == (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # an id the broker does not know: UNKNOWN_TOPIC_ID for each of its partitions
    assert missing.topic_id == unknown
    assert [(p.partition_index, p.error_code, p.high_watermark, _values(p))
            for p in missing.partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_ID, -1, []), (1, ErrorCode.UNKNOWN_TOPIC_ID, -1, [])]
    assert resp.node_endpoints == []
    assert all(p.current_leader.leader_id == -1 for p in known.partitions)


def test_fetch_v13_zero_topic_id_is_unknown(client: RawClient) -> None:
    # a client that sends a name at v13 sends no name at all: only the (zero) id
    resp = _fetch(client, 13, [FetchTopic(topic=TOPIC, partitions=[_fp(0)])])
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fetch_v13_long_poll_by_topic_id_wakes_on_append(broker: Broker, client: RawClient) -> None:
    topic_id = _topic_id(client)
    other = RawClient(broker.bootstrap_servers)
    try:
        other.sock.sendall(other.conn.send(FetchRequest(
            max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20,
            topics=[FetchTopic(topic_id=topic_id, partitions=[_fp(0)])]), 16))
        time.sleep(0.2)
        started = time.monotonic()
        _produce_v9(client, 0, [b"late"])
        while (got := other.conn.next_response()) is None:
            other.conn.receive_data(other.sock.recv(65536))
        assert time.monotonic() - started < 5
        resp: FetchResponse = got[1]
        assert _values(resp.responses[0].partitions[0]) == [b"late"]
    finally:
        other.close()


def test_fetch_v12_still_by_name(client: RawClient) -> None:
    _produce_v9(client, 0, [b"n"])
    resp = _fetch(client, 12, [FetchTopic(topic=TOPIC, partitions=[_fp(0)])])
    assert resp.responses[0].topic == TOPIC
    assert _values(resp.responses[0].partitions[0]) == [b"n"]


# -- Metadata ------------------------------------------------------------------


@pytest.mark.parametrize("version", [12, 13])
def test_metadata_v13_top_level_error_code_is_zero(client: RawClient, version: int) -> None:
    resp = client.request(MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), version)
    assert resp.error_code == 0  # never REBOOTSTRAP_REQUIRED (KIP-1102); not on the wire at v12
    assert [(t.name, t.error_code, len(t.partitions)) for t in resp.topics] == [(TOPIC, 0, 2)]
    everything = client.request(MetadataRequest(topics=None), version)
    assert TOPIC in [t.name for t in everything.topics]
    assert everything.error_code == 0


def test_metadata_v13_from_confluent_kafka(broker: Broker) -> None:
    # librdkafka 2.16 asks Metadata v13 once it is advertised (KIP-1102 rebootstrap).
    from confluent_kafka.admin import AdminClient

    broker.create_topic("k40-admin", partitions=3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert len(md.topics["k40-admin"].partitions) == 3


def test_metadata_v12_unknown_topic_id_echoes_the_id(client: RawClient) -> None:
    topic_id = _topic_id(client)
    unknown = uuid.uuid4()
    resp = client.request(MetadataRequest(topics=[
        MetadataRequestTopic(topic_id=unknown, name=None),
        MetadataRequestTopic(topic_id=topic_id, name=None),
    ]), 12)
    missing, known = resp.topics
    assert (missing.error_code, missing.name, missing.topic_id, missing.partitions) == (
        ErrorCode.UNKNOWN_TOPIC_ID, None, unknown, [])
    assert (known.error_code, known.name, known.topic_id) == (0, TOPIC, topic_id)
    assert len(known.partitions) == 2

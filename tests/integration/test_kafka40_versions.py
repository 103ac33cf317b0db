"""Kafka 4.0's versions of Produce, Fetch, ListOffsets and Metadata, over a real
socket: each new version is sent and its answer checked against what Kafka 4.0
answers on a single node."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from odradek.broker.registry import advertised
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
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
from odradek.wire.records import Record, build_batch
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


def _produce_v9(client: RawClient, partition: int, values: list[bytes]) -> int:
    resp = client.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(TOPIC, [PartitionProduceData(partition, _batch(values))])]), 9)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0
    base: int = p.base_offset
    return base


def _topic_id(client: RawClient, name: str = TOPIC) -> uuid.UUID:
    resp = client.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)]), 12)
    topic_id: uuid.UUID = resp.topics[0].topic_id
    assert topic_id.int != 0
    return topic_id


def test_advertised_ranges_are_kafka_40s() -> None:
    ranges = {key: (lo, hi) for key, lo, hi in advertised()}
    assert ranges[2] == (1, 10)


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
    _produce_v9(client, 0, [b"a", b"b", b"c"])
    _produce_v9(client, 0, [b"d", b"e"])
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

"""Group coordinator conformance: the requests real clients send that Kafka accepts.

Each test replays what the client that found the bug sends:

- aiokafka's ``send_offsets_to_transaction`` sends TxnOffsetCommit v0 (no
  member id, no generation) for a group that has live classic members; Kafka
  needs no membership for a transactional commit.
- librdkafka's KIP-848 consumer commits with generation -1 and its member id
  before it has joined; Kafka looks only at the generation for an empty or
  missing group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.wire.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.integration.groupclients import wait_until
from tests.integration.txnclients import run_async
from tests.support.rawclient import RawClient

TOPIC = "conformance"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as b:
        b.create_topic(TOPIC, partitions=1)
        yield b


def _committed(bootstrap: str, group: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
        return int(got[0].offset)
    finally:
        c.close()


def test_aiokafka_sends_offsets_to_a_transaction_for_a_live_classic_group(
        broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    bs = broker.bootstrap_servers
    group = f"live-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bs, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()  # joins: the group is live (Stable) with one member
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"t-{group}")
        await producer.start()
        try:
            await consumer.getmany(timeout_ms=500)
            assert consumer.assignment() == {ATopicPartition(TOPIC, 0)}
            async with producer.transaction():
                await producer.send_and_wait(TOPIC, b"out", partition=0)
                await producer.send_offsets_to_transaction(
                    {ATopicPartition(TOPIC, 0): 42}, group)
        finally:
            await producer.stop()
            await consumer.stop()

    run_async(run())
    wait_until(lambda: _committed(bs, group) == 42, 10.0,
               "the transactional offset commit of a live group to be applied")


def test_aiokafka_aborted_offsets_to_a_live_group_are_not_applied(broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    bs = broker.bootstrap_servers
    group = f"abort-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bs, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"t-{group}")
        await producer.start()
        try:
            await consumer.getmany(timeout_ms=500)
            await consumer.commit({ATopicPartition(TOPIC, 0): 5})
            await producer.begin_transaction()
            await producer.send_offsets_to_transaction({ATopicPartition(TOPIC, 0): 9}, group)
            await producer.abort_transaction()
        finally:
            await producer.stop()
            await consumer.stop()

    run_async(run())
    assert _committed(bs, group) == 5


def _commit(raw: RawClient, group: str, member: str, generation: int, version: int) -> int:
    resp = raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])]), version)
    code: int = resp.topics[0].partitions[0].error_code
    return code


def _fetch(raw: RawClient, group: str) -> int:
    resp = raw.request(OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]), 7)
    offset: int = resp.topics[0].partitions[0].committed_offset
    return offset


@pytest.mark.parametrize("version", [2, 8, 9])
def test_generation_minus_one_with_a_member_id_commits_to_a_missing_group(
        broker: Broker, version: int) -> None:
    raw = RawClient(broker.bootstrap_servers)
    try:
        group = f"missing-{version}"
        assert _commit(raw, group, "not-joined-yet", -1, version) == ErrorCode.NONE
        assert _fetch(raw, group) == 7
    finally:
        raw.close()


def test_generation_minus_one_with_a_member_id_commits_to_an_empty_group(
        broker: Broker) -> None:
    bs = broker.bootstrap_servers
    group = "emptied"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    wait_until(lambda: (c.poll(0.2), c.assignment())[1] != [], 20.0, "the consumer to join")
    c.close()  # leaves: the group is Empty, its generation moved on
    raw = RawClient(bs)
    try:
        assert _commit(raw, group, "rdkafka-848-member", -1, 9) == ErrorCode.NONE
        assert _fetch(raw, group) == 7
    finally:
        raw.close()


@pytest.mark.parametrize(("version", "code"), [(8, ErrorCode.ILLEGAL_GENERATION),
                                               (9, ErrorCode.GROUP_ID_NOT_FOUND)])
def test_a_generation_for_a_missing_group_is_refused_as_kafka_does(
        broker: Broker, version: int, code: int) -> None:
    raw = RawClient(broker.bootstrap_servers)
    try:
        assert _commit(raw, f"nogroup-{version}", "m", 3, version) == code
    finally:
        raw.close()

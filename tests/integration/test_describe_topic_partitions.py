"""DescribeTopicPartitions (key 75) against a real broker, raw and through clients."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from odradek.broker.handlers import k75_describe_topic_partitions as describe_topic_partitions
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import HANDLERS, advertised, load_all
from odradek.metadata.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from odradek.testing import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_topic_partitions_request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from odradek.wire.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse,
)
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.request_header import RequestHeader
from tests.support.rawclient import RawClient

UNSET_OPERATIONS = -(2**31)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(**{"auto.create.topics.enable": "true"}) as b:
        yield b


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawClient]:
    client = RawClient(broker.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()


def describe(
    raw: RawClient, *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsResponse:
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None,
    )
    response: DescribeTopicPartitionsResponse = raw.request(request, 0)
    return response


def topic_ids(broker: Broker) -> dict[str, uuid.UUID]:
    state = broker.app.state
    assert state is not None
    return {name: t.topic_id for name, t in state.image.topics.items()}


def test_advertised_as_version_0() -> None:
    assert (75, 0, 0) in advertised()


def test_all_topics_when_the_list_is_empty(broker: Broker, raw: RawClient) -> None:
    broker.create_topic("b-topic", 2)
    broker.create_topic("a-topic", 3)
    resp = describe(raw)
    assert resp.next_cursor is None
    assert [t.name for t in resp.topics] == ["a-topic", "b-topic"]
    ids = topic_ids(broker)
    node = broker.app.config.node_id
    for t in resp.topics:
        assert t.error_code == 0
        assert t.topic_id == ids[t.name] and t.topic_id.int != 0
        assert t.is_internal is False
        assert t.topic_authorized_operations == UNSET_OPERATIONS
        assert [p.partition_index for p in t.partitions] == list(range(len(t.partitions)))
        for p in t.partitions:
            assert p.error_code == 0
            assert p.leader_id == node
            assert p.leader_epoch == 0
            assert p.replica_nodes == [node]
            assert p.isr_nodes == [node]
            assert p.eligible_leader_replicas == []
            assert p.last_known_elr == []
            assert p.offline_replicas == []
    assert [len(t.partitions) for t in resp.topics] == [3, 2]


def test_named_topics_in_name_order_each_once(broker: Broker, raw: RawClient) -> None:
    for name in ("x", "y", "z"):
        broker.create_topic(name, 1)
    resp = describe(raw, "z", "x", "z")
    assert [(t.name, t.error_code) for t in resp.topics] == [("x", 0), ("z", 0)]
    assert resp.topics[1].topic_id == topic_ids(broker)["z"]


def test_unknown_topic_is_reported_and_not_created(broker: Broker, raw: RawClient) -> None:
    broker.create_topic("known", 1)
    resp = describe(raw, "known", "missing", "bad name!")
    by_name = {t.name: t for t in resp.topics}
    assert [t.name for t in resp.topics] == ["bad name!", "known", "missing"]
    missing = by_name["missing"]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.topic_id.int == 0 and missing.partitions == []
    assert by_name["bad name!"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert by_name["known"].error_code == 0
    # auto.create.topics.enable is on, and still nothing was created
    assert "missing" not in topic_ids(broker)
    assert describe(raw, "missing").topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_internal_topic_is_flagged(broker: Broker, raw: RawClient) -> None:
    assert raw.request(FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
    broker.create_topic("plain", 1)
    resp = describe(raw, "__consumer_offsets", "plain")
    offsets, plain = resp.topics
    assert offsets.name == "__consumer_offsets" and offsets.error_code == 0
    assert offsets.is_internal is True
    assert len(offsets.partitions) == broker.app.config.get_int("offsets.topic.num.partitions")
    assert plain.is_internal is False
    everything = describe(raw)
    assert {t.name: t.is_internal for t in everything.topics} == {
        "__consumer_offsets": True, "plain": False,
    }


def test_pagination_visits_every_partition_once(broker: Broker, raw: RawClient) -> None:
    broker.create_topic("five", 5)
    seen: list[int] = []
    cursors: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(10):
        resp = describe(raw, "five", limit=2, cursor=cursor)
        assert [t.name for t in resp.topics] == ["five"]
        assert len(resp.topics[0].partitions) <= 2
        seen += [p.partition_index for p in resp.topics[0].partitions]
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
        cursors.append(cursor)
    assert seen == [0, 1, 2, 3, 4]
    assert cursors == [("five", 2), ("five", 4)]


def test_pagination_across_all_topics(broker: Broker, raw: RawClient) -> None:
    broker.create_topic("a", 2)
    broker.create_topic("b", 5)
    broker.create_topic("c", 1)
    pages: list[list[tuple[str, int]]] = []
    cursors: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(10):
        resp = describe(raw, limit=3, cursor=cursor)
        pages.append([(t.name, p.partition_index) for t in resp.topics for p in t.partitions])
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
        cursors.append(cursor)
    assert pages == [
        [("a", 0), ("a", 1), ("b", 0)],
        [("b", 1), ("b", 2), ("b", 3)],
        [("b", 4), ("c", 0)],
    ]
    assert cursors == [("b", 1), ("b", 4)]
    # a limit reached exactly at the end of a topic points at the next one, partition 0
    resp = describe(raw, limit=2)
    assert [t.name for t in resp.topics] == ["a"]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("b", 0)


def test_limit_is_clamped_and_unknown_topics_cost_nothing(broker: Broker, raw: RawClient) -> None:
    broker.create_topic("t", 3)
    # a limit below 1 is 1
    resp = describe(raw, "t", limit=0)
    assert [p.partition_index for p in resp.topics[0].partitions] == [0]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("t", 1)
    # unknown topics are answered without using the limit
    resp = describe(raw, "s-missing", "t", limit=3)
    assert [t.name for t in resp.topics] == ["s-missing", "t"]
    assert len(resp.topics[1].partitions) == 3 and resp.next_cursor is None


def test_limit_is_capped_at_2000() -> None:
    # On the handler with an image of 2,001 partitions: a real topic that wide
    # takes a real broker seconds to create (a log directory per partition).
    image = MetadataImage()
    wide = TopicImage("wide", uuid.uuid4())
    wide.partitions = {i: PartitionImage(i, [1], [1], 1, 0, 0) for i in range(2001)}
    image.topics["wide"] = wide
    image.by_id[wide.topic_id] = "wide"
    state = SimpleNamespace(image=image, endpoint_of=lambda node: object())
    ctx = RequestContext(cast(Any, state), 0, RequestHeader(request_api_key=75), "test")

    def ask(cursor: Cursor | None) -> DescribeTopicPartitionsResponse:
        request = DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name="wide")], response_partition_limit=5000, cursor=cursor)
        answer = asyncio.run(describe_topic_partitions.handle(ctx, request))
        return DescribeTopicPartitionsResponse.decode(answer.encode(0), 0)

    resp = ask(None)
    assert len(resp.topics[0].partitions) == 2000
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("wide", 2000)
    rest = ask(Cursor(topic_name="wide", partition_index=2000))
    assert [p.partition_index for p in rest.topics[0].partitions] == [2000]
    assert rest.next_cursor is None


def test_offline_replicas_and_a_leader_not_registered() -> None:
    # Broker 1 is live, broker 2 fenced, broker 3 not registered (a cluster mid-failure).
    image = MetadataImage()
    for node, fenced in ((1, False), (2, True)):
        image.brokers[node] = BrokerImage(node, 0, uuid.uuid4(), [], fenced=fenced)
    t = TopicImage("r3", uuid.uuid4())
    t.partitions = {
        0: PartitionImage(0, [1, 2, 3], [1], 1, 4, 7),
        1: PartitionImage(1, [3, 2, 1], [3], 3, 2, 2),
    }
    image.topics["r3"] = t
    image.by_id[t.topic_id] = "r3"
    state = SimpleNamespace(
        image=image, endpoint_of=lambda node: object() if node == 1 else None)
    ctx = RequestContext(cast(Any, state), 0, RequestHeader(request_api_key=75), "test")
    answer = asyncio.run(describe_topic_partitions.handle(ctx, DescribeTopicPartitionsRequest()))
    (topic,) = answer.topics
    p0, p1 = topic.partitions
    assert (p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == (
        1, 4, [1, 2, 3], [1], [2, 3])
    assert (p1.leader_id, p1.leader_epoch, p1.offline_replicas) == (-1, 2, [3, 2])
    assert p0.error_code == p1.error_code == 0


def test_cursor_skips_earlier_topics_and_must_name_a_requested_topic(
    broker: Broker, raw: RawClient
) -> None:
    broker.create_topic("m", 2)
    broker.create_topic("n", 2)
    resp = describe(raw, cursor=("m", 1))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [
        ("m", [1]), ("n", [0, 1]),
    ]
    resp = describe(raw, "m", "n", cursor=("n", 0))
    assert [t.name for t in resp.topics] == ["n"]
    # a cursor past the last partition answers the topic with no partitions
    resp = describe(raw, "m", cursor=("m", 7))
    assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [("m", 0, [])]
    # Kafka: the cursor's topic must be listed, and its partition not negative
    bad = describe(raw, "m", cursor=("n", 0))
    assert [(t.name, t.error_code) for t in bad.topics] == [("m", ErrorCode.INVALID_REQUEST)]
    bad = describe(raw, "m", "n", cursor=("m", -1))
    assert {t.error_code for t in bad.topics} == {ErrorCode.INVALID_REQUEST}
    assert describe(raw, cursor=("m", -1)).topics == []


@pytest.fixture
def api_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Counts the requests the broker serves, by API key."""
    calls: Counter[int] = Counter()
    for key, reg in list(load_all().items()):  # every module: they load on first use
        def counting(ctx: Any, request: Any, _key: int = key, _handle: Any = reg.handle) -> Any:
            calls[_key] += 1
            return _handle(ctx, request)
        monkeypatch.setitem(HANDLERS, key, dataclasses.replace(reg, handle=counting))
    return calls


def test_kafka_python_admin(broker: Broker, api_calls: Counter[int]) -> None:
    broker.create_topic("kp", 3)
    broker.create_topic("kq", 1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        api_calls.clear()
        described = admin.describe_topics(["kp"])
        # kafka-python 3.0's describe_topics reads Metadata, not DescribeTopicPartitions
        assert api_calls[3] >= 1 and api_calls[75] == 0
        assert len(described) == 1
        kp = described[0]
        assert kp["name"] == "kp" and kp["error_code"] == 0 and kp["is_internal"] is False
        assert kp["topic_id"] == str(topic_ids(broker)["kp"])
        assert [p["partition_index"] for p in kp["partitions"]] == [0, 1, 2]

        # its describe_topic_partitions sends DescribeTopicPartitions
        api_calls.clear()
        first = admin.describe_topic_partitions(["kp", "kq", "nope"], response_partition_limit=2)
        assert api_calls[75] == 1
        assert [(t["name"], t["error_code"]) for t in first["topics"]] == [("kp", 0)]
        assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
        assert str(first["topics"][0]["topic_id"]) == str(topic_ids(broker)["kp"])
        assert first["next_cursor"] == {"topic_name": "kp", "partition_index": 2}
        rest = admin.describe_topic_partitions(
            ["kp", "kq", "nope"], response_partition_limit=2, cursor=first["next_cursor"]
        )
        assert [(t["name"], t["error_code"]) for t in rest["topics"]] == [("kp", 0), ("kq", 0)]
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
        # the limit ran out exactly: the cursor names the next topic, known or not
        assert rest["next_cursor"] == {"topic_name": "nope", "partition_index": 0}
        last = admin.describe_topic_partitions(
            ["kp", "kq", "nope"], response_partition_limit=2, cursor=rest["next_cursor"]
        )
        assert [(t["name"], t["error_code"]) for t in last["topics"]] == [
            ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert last["next_cursor"] is None
        node = broker.app.config.node_id
        p = rest["topics"][1]["partitions"][0]
        assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["offline_replicas"]) == (
            node, [node], [node], [])
    finally:
        admin.close()


def test_confluent_kafka_admin(broker: Broker, api_calls: Counter[int]) -> None:
    broker.create_topic("ck", 4)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    api_calls.clear()
    futures = admin.describe_topics(TopicCollection(["ck", "ck-missing"]), request_timeout=10)
    desc = futures["ck"].result(timeout=10)
    with pytest.raises(KafkaException) as missing:
        futures["ck-missing"].result(timeout=10)
    assert missing.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # librdkafka 2.16 describes topics with Metadata, not DescribeTopicPartitions;
    # either way the answer must be right
    assert api_calls[3] + api_calls[75] >= 1
    assert desc.name == "ck" and desc.is_internal is False
    ck_id = topic_ids(broker)["ck"].int
    assert desc.topic_id.get_most_significant_bits() & (2**64 - 1) == ck_id >> 64
    assert desc.topic_id.get_least_significant_bits() & (2**64 - 1) == ck_id & (2**64 - 1)
    node = broker.app.config.node_id
    assert [p.id for p in desc.partitions] == [0, 1, 2, 3]
    for p in desc.partitions:
        assert p.leader.id == node
        assert [r.id for r in p.replicas] == [node]
        assert [r.id for r in p.isr] == [node]
    assert "ck-missing" not in topic_ids(broker)


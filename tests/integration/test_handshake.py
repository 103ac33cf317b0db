"""Every client negotiates versions and reads metadata from a real broker, and
every served (API, version) is answered over a real socket.

The Kafka 4.0 versions of the APIs below are exercised here with the project's
encoder where no installed client sends them: ApiVersions 4 (features),
Metadata 13, FindCoordinator 5-6, JoinGroup 8-9, LeaveGroup 5, DescribeCluster
2. Where a client does send one (kafka-python: ApiVersions 4, Metadata 13,
FindCoordinator 6, LeaveGroup 5; librdkafka: Metadata 13), its frame is also in
``tests/golden``. The transaction versions are in test_kafka40_txn_versions.py,
Produce/Fetch/ListOffsets/Metadata in test_kafka40_versions.py."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.net.registry import advertised
from odradek.metadata.image import BrokerImage, Endpoint
from odradek.testing.broker import Broker
from odradek.wire import api
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import (
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from odradek.wire.schema import Message
from tests.support.rawclient import RawClient

GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def shared() -> Iterator[Broker]:
    """One broker for the tests that only read, or write under names of their own."""
    with Broker(**GROUPS) as b:
        yield b


@pytest.fixture
def raw(shared: Broker) -> Iterator[RawClient]:
    client = RawClient(shared.bootstrap_servers)
    yield client
    client.close()


def test_api_versions_lists_exactly_the_registered_handlers(broker: Broker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        for version in range(5):
            resp = client.request(ApiVersionsRequest(), version)
            assert resp.error_code == 0
            listed = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
            assert listed == advertised()
    finally:
        client.close()


def test_unsupported_api_versions_version_gets_v0_body_with_error_35(broker: Broker) -> None:
    # We serve 0-4; a client newer than that gets the KIP-511 fallback.
    client = RawClient(broker.bootstrap_servers)
    try:
        body = ApiVersionsRequest(client_software_name="t", client_software_version="1").encode(4)
        header = struct.pack(">hhih", 18, 5, 77, 1) + b"x" + b"\x00"
        frame = header + body
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            data += client.sock.recv(65536)
        size, corr = struct.unpack(">ii", data[:8])
        assert corr == 77
        resp = ApiVersionsResponse.decode(data[8 : 4 + size], 0)  # v0 header, v0 body
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
        # the connection stays usable
        assert client.request(ApiVersionsRequest(), 3).error_code == 0
    finally:
        client.close()


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7, 9, 10, 12, 13])
def test_metadata_every_version_auto_creates_and_lists(broker: Broker, version: int) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        name = f"meta-v{version}"
        topics = [MetadataRequestTopic(name=name)]
        resp = client.request(MetadataRequest(topics=topics), version)
        assert [t.name for t in resp.topics] == [name]
        assert resp.topics[0].error_code == 0
        assert len(resp.topics[0].partitions) == 1
        assert resp.brokers[0].port == int(broker.bootstrap_servers.rsplit(":", 1)[1])
        if version >= 10:
            assert resp.topics[0].topic_id.int != 0
    finally:
        client.close()


def test_metadata_without_auto_create_reports_unknown_topic() -> None:
    with Broker(**{"auto.create.topics.enable": "false"}) as b:
        client = RawClient(b.bootstrap_servers)
        try:
            req = MetadataRequest(topics=[MetadataRequestTopic(name="nope")])
            resp = client.request(req, 9)
            assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            client.close()


def test_confluent_admin_creates_lists_grows_and_deletes(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic("orders", 3, 1), NewTopic("bad name!", 1, 1)])
    assert futures["orders"].result(10) is None
    with pytest.raises(Exception, match="TOPIC_EXCEPTION"):
        futures["bad name!"].result(10)
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(10)
    with pytest.raises(Exception, match="REPLICATION_FACTOR"):
        admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["orders"].partitions) == 3
    from confluent_kafka.admin import NewPartitions

    assert admin.create_partitions([NewPartitions("orders", 6)])["orders"].result(10) is None
    assert len(admin.list_topics(timeout=10).topics["orders"].partitions) == 6
    assert admin.delete_topics(["orders"])["orders"].result(10) is None
    assert "orders" not in admin.list_topics(timeout=10).topics


def test_kafka_python_admin_round_trip(broker: Broker) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([KNewTopic("kp", num_partitions=2, replication_factor=1)])
        assert "kp" in admin.list_topics()
        described = admin.describe_topics(["kp"])[0]
        assert len(described["partitions"]) == 2
        admin.delete_topics(["kp"])
        assert "kp" not in admin.list_topics()
    finally:
        admin.close()


def test_aiokafka_admin_round_trip(broker: Broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic("aio", num_partitions=4, replication_factor=1)])
            assert "aio" in await admin.list_topics()
            await admin.delete_topics(["aio"])
            assert "aio" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())


def test_broker_on_uvloop_serves_real_clients() -> None:
    # odradek serve runs on uvloop, whose transports are not asyncio.Transport.
    with Broker(use_uvloop=True) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert admin.create_topics([NewTopic("uv", 2, 1)])["uv"].result(10) is None
        assert len(admin.list_topics(timeout=10).topics["uv"].partitions) == 2


# -- every served version, over a socket -------------------------------------------


def _minimal(api_key: int) -> Message:
    """The request of ``api_key`` with every field at its default; for Produce acks=1
    (the default, 0, is answered with no response at all) and one partition of a
    topic that does not exist."""
    if api_key == 0:
        return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
            TopicProduceData("no-such-topic", [PartitionProduceData(0, None)])])
    body: Message = api.request_class(api_key)()
    return body


@pytest.mark.parametrize(("api_key", "version"), [
    (key, v) for key, lo, hi in advertised() for v in range(lo, hi + 1)])
def test_every_served_version_is_answered(shared: Broker, api_key: int, version: int) -> None:
    # A request with default fields at every advertised version gets an answer that
    # decodes at that version (errors included: v0-2 of Produce are
    # UNSUPPORTED_VERSION, the controller APIs INVALID_REQUEST on a single node).
    client = RawClient(shared.bootstrap_servers, timeout_s=5)
    try:
        resp = client.request(_minimal(api_key), version)
    finally:
        client.close()
    assert type(resp) is api.response_class(api_key)
    assert resp.encode(version)  # every field fits this version
    if api_key == 0:
        [[code]] = [[p.error_code for p in t.partition_responses] for t in resp.responses]
        assert code == (ErrorCode.UNSUPPORTED_VERSION if version < 3
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


# -- ApiVersions 3-4: feature levels (KIP-584) ----------------------------------


@pytest.mark.parametrize("version", range(5))
def test_api_versions_feature_levels(shared: Broker, raw: RawClient, version: int) -> None:
    resp = raw.request(ApiVersionsRequest(client_software_name="odradek-tests",
                                          client_software_version="1"), version)
    assert resp.error_code == 0
    if version < 3:  # not on the wire: decoded as defaults
        assert (resp.supported_features, resp.finalized_features_epoch,
                resp.finalized_features) == ([], -1, [])
        return
    supported = [SupportedFeatureKey("metadata.version", 25, 25)]
    if version >= 4:  # KAFKA-17011: a minimum level of 0 only from v4
        supported += [SupportedFeatureKey("kraft.version", 0, 1),
                      SupportedFeatureKey("group.version", 0, 1),
                      SupportedFeatureKey("transaction.version", 0, 2)]
    assert resp.supported_features == supported
    # finalized: level 0 (kraft.version) is not listed; a new cluster finalizes
    # transaction.version 2 (transactions v2) as Kafka 4.0 does
    assert resp.finalized_features == [
        FinalizedFeatureKey("metadata.version", max_version_level=25, min_version_level=25),
        FinalizedFeatureKey("group.version", max_version_level=1, min_version_level=1),
        FinalizedFeatureKey("transaction.version", max_version_level=2, min_version_level=2)]
    # the epoch is the offset of the last metadata record applied, as in Kafka
    state = shared.app.state
    assert state is not None and resp.finalized_features_epoch == state.metadata.applied - 1
    assert resp.finalized_features_epoch >= 1  # metadata.version, transaction.version at least


def test_kafka_python_describe_features(shared: Broker) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=shared.bootstrap_servers)
    try:
        features = admin.describe_features()
    finally:
        admin.close()
    state = shared.app.state
    assert state is not None
    epoch = state.metadata.applied - 1  # the last metadata record's offset, as in Kafka
    assert features == {
        "metadata.version": {"supported": (25, 25), "finalized": (25, 25),
                             "finalized_epoch": epoch},
        "kraft.version": {"supported": (0, 1)},
        "group.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": epoch},
        "transaction.version": {"supported": (0, 2), "finalized": (2, 2),
                                "finalized_epoch": epoch},
    }


# -- FindCoordinator 5-6 ----------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_v5_v6(raw: RawClient, shared: Broker, version: int) -> None:
    port = int(shared.bootstrap_servers.rsplit(":", 1)[1])
    groups = raw.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]),
                         version)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in groups.coordinators] == [
        ("g1", 0, 1, port), ("g2", 0, 1, port)]
    txn = raw.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tid"]), version)
    assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [("tid", 0, port)]
    # key type 2 (share groups, KIP-932, v6): not served
    share = raw.request(FindCoordinatorRequest(key_type=2, coordinator_keys=["g:t:0"]), version)
    [c] = share.coordinators
    assert (c.error_code, c.node_id, c.port) == (ErrorCode.INVALID_REQUEST, -1, -1)
    if version >= 6:
        assert c.error_message == "share groups are not served"


def test_kafka_python_finds_its_coordinator(shared: Broker) -> None:
    # kafka-python 3 looks coordinators up with FindCoordinator v6 against this
    # range (its frame: tests/golden/kafka-python/FindCoordinator-v6-0.bin)
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=shared.bootstrap_servers)
    try:
        assert admin.list_group_offsets("kp-no-commits") == {"kp-no-commits": {}}
    finally:
        admin.close()


# -- JoinGroup 8-9, LeaveGroup 5 ---------------------------------------------------


def _join(raw: RawClient, group: str, version: int, member_id: str = "") -> Any:
    return raw.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id=member_id, protocol_type="consumer", reason="test: first start",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"meta")],
    ), version)


@pytest.mark.parametrize(("join_v", "leave_v"), [(8, 4), (8, 5), (9, 5)])
def test_join_group_v8_v9_and_leave_group_v5_with_reasons(
    raw: RawClient, join_v: int, leave_v: int
) -> None:
    group = f"reasons-{join_v}-{leave_v}"
    first = _join(raw, group, join_v)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = _join(raw, group, join_v, first.member_id)
    assert (joined.error_code, joined.generation_id, joined.protocol_type,
            joined.protocol_name, joined.skip_assignment) == (0, 1, "consumer", "range", False)
    me = joined.member_id
    assert joined.leader == me
    synced = raw.request(SyncGroupRequest(
        group_id=group, generation_id=1, member_id=me, protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=me, assignment=b"mine")]), 5)
    assert (synced.error_code, synced.assignment) == (0, b"mine")
    left = raw.request(LeaveGroupRequest(group_id=group, members=[
        MemberIdentity(member_id=me, reason="test: shutting down"),
        MemberIdentity(member_id="stranger", reason="never joined")]), leave_v)
    assert left.error_code == 0
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (me, 0), ("stranger", ErrorCode.UNKNOWN_MEMBER_ID)]
    [described] = raw.request(DescribeGroupsRequest(groups=[group]), 5).groups
    assert (described.group_state, described.members) == ("Empty", [])


# -- DescribeCluster 2 -----------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_describe_cluster_v2_lists_fenced_brokers_only_when_asked(
    broker: Broker, version: int
) -> None:
    state = broker.app.state
    assert state is not None
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    # A registered broker that is fenced (its session lapsed): a single node has
    # none, so put one in the image, as a fenced registration would.
    fenced = BrokerImage(7, 3, state.ids.uuid(), [Endpoint("PLAINTEXT", "10.0.0.7", 9092)],
                         rack="r7", fenced=True)
    state.image.brokers[7] = fenced
    client = RawClient(broker.bootstrap_servers)
    try:
        plain = client.request(DescribeClusterRequest(), version)
        every = (client.request(DescribeClusterRequest(include_fenced_brokers=True), version)
                 if version >= 2 else None)  # the flag cannot be sent before v2
    finally:
        client.close()
        del state.image.brokers[7]
    me = (1, host, int(port), None, False)
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in plain.brokers] == [me]
    assert (plain.error_code, plain.cluster_id) == (0, state.cluster_id)
    if every is not None:
        assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in every.brokers] == [
            me, (7, "10.0.0.7", 9092, "r7", True)]


def test_kafka_python_describe_cluster(shared: Broker) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=shared.bootstrap_servers)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    host, port = shared.bootstrap_servers.rsplit(":", 1)
    assert described["brokers"] == [
        {"broker_id": 1, "host": host, "port": int(port), "rack": None, "is_fenced": False}]

"""Every client negotiates versions and reads metadata from a real broker."""

from __future__ import annotations

import asyncio
import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.registry import advertised
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import ApiVersionsResponse
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.rawclient import RawClient


def test_api_versions_lists_exactly_the_registered_handlers(broker: Broker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        for version in range(4):
            resp = client.request(ApiVersionsRequest(), version)
            assert resp.error_code == 0
            listed = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
            assert listed == advertised()
    finally:
        client.close()


def test_unsupported_api_versions_version_gets_v0_body_with_error_35(broker: Broker) -> None:
    # kafka-python 3 opens with ApiVersions v4; we serve 0-3 (KIP-511 fallback).
    client = RawClient(broker.bootstrap_servers)
    try:
        body = ApiVersionsRequest(client_software_name="t", client_software_version="1").encode(4)
        header = struct.pack(">hhih", 18, 4, 77, 1) + b"x" + b"\x00"
        frame = header + body
        client.send_raw(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            data += client.sock.recv(65536)
        size, corr = struct.unpack(">ii", data[:8])
        assert corr == 77
        resp = ApiVersionsResponse.decode(data[8 : 4 + size], 0)  # v0 header, v0 body
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert (18, 0, 3) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
        # the connection stays usable
        assert client.request(ApiVersionsRequest(), 3).error_code == 0
    finally:
        client.close()


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7, 9, 10, 12])
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

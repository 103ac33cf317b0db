"""The admin calls Kafka 4's tools make, against a single node, with
kafka-python's admin client: the answers Kafka gives on a single combined node
(DescribeQuorum of a one-voter quorum, preferred election not needed,
reassignment to the replicas it has, no reassignment in progress), producers
described, topics described through DescribeTopicPartitions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from odradek.testing import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from tests.support.rawclient import RawClient

TOPIC = "admin-single"


@pytest.fixture
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    broker.create_topic(TOPIC, partitions=2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()


def test_describe_quorum_shows_the_node_as_its_one_voter(
    broker: Broker, admin: KafkaAdminClient
) -> None:
    described = admin.describe_metadata_quorum()
    assert [t["topic_name"] for t in described["topics"]] == ["__cluster_metadata"]
    quorum = described["topics"][0]["partitions"][0]
    assert quorum["error"] is None
    assert quorum["leader_id"] == 1 and quorum["leader_epoch"] >= 1
    voters = quorum["current_voters"]
    assert [v["replica_id"] for v in voters] == [1] and quorum["observers"] == []
    # every metadata record is committed once written: the HW is the journal's end
    assert quorum["high_watermark"] == voters[0]["log_end_offset"] > 0
    broker.create_topic("admin-single-2", partitions=1)
    later = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
    assert later["high_watermark"] > quorum["high_watermark"]
    assert [n["node_id"] for n in described["nodes"]] == [1]


def test_preferred_election_is_not_needed_and_reassignment_keeps_the_replica(
    broker: Broker, admin: KafkaAdminClient
) -> None:
    raw = RawClient(broker.bootstrap_servers)
    try:
        resp = raw.request(ElectLeadersRequest(election_type=0, topic_partitions=[
            TopicPartitions(topic=TOPIC, partitions=[0, 9])], timeout_ms=5000), 2)
    finally:
        raw.close()
    results = {p.partition_id: p.error_code
               for t in resp.replica_election_results for p in t.partition_result}
    assert results == {0: ErrorCode.ELECTION_NOT_NEEDED, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.list_partition_reassignments() == {}
    done = admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [1]})
    assert done == {TopicPartition(TOPIC, 0): None}
    assert admin.list_partition_reassignments() == {}


def test_describe_producers_and_topics(broker: Broker, admin: KafkaAdminClient) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "enable.idempotence": True})
    producer.produce(TOPIC, b"v", partition=1)
    assert producer.flush(30) == 0
    described = admin.describe_producers([TopicPartition(TOPIC, 1), TopicPartition(TOPIC, 0)])
    active = described[TopicPartition(TOPIC, 1)].active_producers
    assert len(active) == 1 and active[0].last_sequence == 0
    assert described[TopicPartition(TOPIC, 0)].active_producers == []
    topics = admin.describe_topics([TOPIC])
    assert [(t["name"], len(t["partitions"])) for t in topics] == [(TOPIC, 2)]
    paged = admin.describe_topic_partitions([TOPIC])
    assert {p["partition_index"] for t in paged["topics"] for p in t["partitions"]} == {0, 1}


def test_a_single_node_refuses_a_peers_kraft_requests_and_keeps_serving(broker: Broker) -> None:
    """A single node runs no quorum and takes no other broker: a Vote, a
    follower's Fetch of ``__cluster_metadata``, a BrokerRegistration and a
    BrokerHeartbeat get INVALID_REQUEST, and the node goes on serving."""
    import uuid

    from odradek.wire.messages import broker_heartbeat_request as hb
    from odradek.wire.messages import broker_registration_request as br
    from odradek.wire.messages import fetch_request as fq
    from odradek.wire.messages import vote_request as vq
    from odradek.wire.messages.metadata_request import MetadataRequest

    cluster_id = broker.app.state.cluster_id if broker.app.state else ""
    requests = [
        (52, 2, vq.VoteRequest(cluster_id, 1, [vq.TopicData("__cluster_metadata", [
            vq.PartitionData(0, 5, 2, last_offset_epoch=4, last_offset=10)])])),
        (1, 12, fq.FetchRequest(cluster_id, replica_id=2, topics=[fq.FetchTopic(
            "__cluster_metadata", partitions=[fq.FetchPartition(0, -1, 0, 0)])])),
        (62, 2, br.BrokerRegistrationRequest(
            broker_id=2, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[br.Listener("PLAINTEXT", "h", 1, 0)])),
        (63, 0, hb.BrokerHeartbeatRequest(broker_id=2, broker_epoch=0)),
    ]
    raw = RawClient(broker.bootstrap_servers)
    try:
        for api_key, version, body in requests:
            assert raw.request(body, version).error_code == ErrorCode.INVALID_REQUEST, api_key
        assert [b.node_id for b in raw.request(MetadataRequest(topics=[]), 12).brokers] == [1]
    finally:
        raw.close()

"""ACLs live in the metadata log: they survive a restart, and in a cluster an
ACL created through any node is enforced by every node."""

from __future__ import annotations

import tempfile
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka import admin as ck

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import create_acls_request as cacl
from odradek.wire.messages import metadata_request as md
from odradek.wire.messages import produce_request as pr
from tests.integration.security.aclsupport import STANDARD
from tests.integration.security.test_acl_confluent import produce
from tests.support.rawclient import RawClient

OPEN = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}


def test_acls_survive_a_restart(principal: str) -> None:
    with tempfile.TemporaryDirectory(prefix="odradek-acl-") as data:
        with Broker(data_dir=data, **OPEN) as b:
            b.create_topic("kept")
            conf = {"bootstrap.servers": b.bootstrap_servers}
            admin = ck.AdminClient(conf)
            binding = ck.AclBinding(ck.ResourceType.TOPIC, "kept", ck.ResourcePatternType.LITERAL,
                                    principal, "*", ck.AclOperation.WRITE,
                                    ck.AclPermissionType.DENY)
            admin.create_acls([binding])[binding].result(15)
            assert [e.code() for e in produce(conf, "kept", 1)] == [
                KafkaError.TOPIC_AUTHORIZATION_FAILED]
        with Broker(data_dir=data, **OPEN) as b:
            conf = {"bootstrap.servers": b.bootstrap_servers}
            assert [e.code() for e in produce(conf, "kept", 1)] == [
                KafkaError.TOPIC_AUTHORIZATION_FAILED]
            everything = ck.AclBindingFilter(ck.ResourceType.ANY, None,
                                             ck.ResourcePatternType.ANY, None, None,
                                             ck.AclOperation.ANY, ck.AclPermissionType.ANY)
            assert ck.AdminClient(conf).describe_acls(everything).result(15) == [binding]


def _topic_error(address: str, topic: str) -> int:
    raw = RawClient(address)
    try:
        answer = raw.request(md.MetadataRequest([md.MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    return int(answer.topics[0].error_code)


def _produce_error(address: str, topic: str) -> int:
    raw = RawClient(address)
    try:
        answer = raw.request(pr.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
            pr.TopicProduceData(topic, [pr.PartitionProduceData(0, None)])]), 9)
    finally:
        raw.close()
    return int(answer.responses[0].partition_responses[0].error_code)


def test_an_acl_created_on_one_node_is_enforced_on_all(tmp_path: Path, principal: str) -> None:
    from tests.support.cluster import LocalCluster, active_controller, wait_for

    cluster = LocalCluster(tmp_path, controllers=3, overrides=OPEN)
    cluster.format()
    cluster.start()
    try:
        admin = ck.AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=5).brokers) == 3 or None, 60)
        for name in ("open", "closed"):
            admin.create_topics([ck.NewTopic(name, 1, 3)])[name].result(30)
        controller = active_controller(cluster.bootstrap)
        via = next(n for n in cluster.nodes if n != controller)  # forwarded to the controller
        raw = RawClient(cluster.nodes[via].address)
        try:
            answer = raw.request(cacl.CreateAclsRequest([cacl.AclCreation(
                2, "closed", 3, principal, "*", 2, 2)]), 3)  # DENY ALL
        finally:
            raw.close()
        assert [r.error_code for r in answer.results] == [0]
        for node in cluster.nodes.values():
            wait_for(f"node {node.node_id} to refuse the topic",
                     lambda node=node: _topic_error(node.address, "closed")
                     == ErrorCode.TOPIC_AUTHORIZATION_FAILED or None, 30)
            assert _produce_error(node.address, "closed") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert _topic_error(node.address, "open") == 0
    finally:
        cluster.stop()

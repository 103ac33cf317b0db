"""The client libraries' own ACL tests, against Odradek, and their view of a
refusal: confluent-kafka-python's ``verify_admin_acls`` sequence, kafka-python's
``test_create_describe_delete_acls``, aiokafka's denials (``tests/test_sasl.py``)
and kafka-python's producer and consumer refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from tests.integration.security.aclsupport import GROUP, STANDARD, TOPIC, Op, allow, deny

TIMEOUT = 15


@pytest.fixture
def admin_broker(principal: str) -> Iterator[Broker]:
    """The clients' principal is a super user (ACL administration needs ALTER
    on the cluster); nobody else is allowed anything without an ACL."""
    with Broker(**{"authorizer.class.name": STANDARD, "super.users": principal}) as b:
        yield b


def test_confluent_verify_admin_acls(admin_broker: Broker) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    admin = AdminClient({"bootstrap.servers": admin_broker.bootstrap_servers})
    topic, group = "test-topic-acls", "test-group-acls"
    b1 = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                    "User:test-user-1", "*", AclOperation.READ, AclPermissionType.ALLOW)
    b2 = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.PREFIXED,
                    "User:test-user-2", "*", AclOperation.WRITE, AclPermissionType.DENY)
    b3 = AclBinding(ResourceType.GROUP, group, ResourcePatternType.PREFIXED,
                    "User:test-user-2", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    for f in admin.create_acls([b1, b2, b3]).values():
        f.result(TIMEOUT)

    def flt(rtype: Any, pattern: Any) -> Any:
        return AclBindingFilter(rtype, None, pattern, None, None, AclOperation.ANY,
                                AclPermissionType.ANY)
    everything = flt(ResourceType.ANY, ResourcePatternType.ANY)
    prefixed = flt(ResourceType.ANY, ResourcePatternType.PREFIXED)
    topics = flt(ResourceType.TOPIC, ResourcePatternType.ANY)
    groups = flt(ResourceType.GROUP, ResourcePatternType.ANY)

    assert sorted(admin.describe_acls(everything).result(TIMEOUT)) == sorted([b1, b2, b3])
    assert sorted(admin.delete_acls([prefixed])[prefixed].result(TIMEOUT)) == [b2, b3]
    results = admin.delete_acls([topics, groups])
    assert sorted(results[topics].result(TIMEOUT)) == [b1]
    assert sorted(results[groups].result(TIMEOUT)) == []
    assert admin.describe_acls(everything).result(TIMEOUT) == []


def test_kafka_python_create_describe_delete_acls(admin_broker: Broker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )
    from kafka.errors import NoError

    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap_servers)
    try:
        def on_topic(principal: str | None, op: Any, perm: Any) -> ACLFilter:
            return ACLFilter(principal=principal, host="*", operation=op, permission_type=perm,
                             resource_pattern=ResourcePattern(ResourceType.TOPIC, "topic"))

        acls, error = admin.describe_acls(on_topic(None, ACLOperation.ANY, ACLPermissionType.ANY))
        assert error is NoError and len(acls) == 0
        acl = ACL(principal="User:test", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, "topic"))
        result = admin.create_acls([acl])
        assert len(result["failed"]) == 0 and len(result["succeeded"]) == 1
        acls, error = admin.describe_acls(on_topic(None, ACLOperation.ANY, ACLPermissionType.ANY))
        assert error is NoError and len(acls) == 1
        deleted = admin.delete_acls([on_topic("User:test", ACLOperation.READ,
                                              ACLPermissionType.ALLOW)])
        assert len(deleted) == 1 and len(deleted[0][1]) == 1
        acls, error = admin.describe_acls(on_topic("*", ACLOperation.ANY, ACLPermissionType.ANY))
        assert error is NoError and len(acls) == 0
        assert len(admin_broker.app.state.image.acls) == 0
    finally:
        admin.close()


def test_kafka_python_producer_and_consumer_refused(secured: Broker,
                                                    kafka_python_config: dict[str, Any],
                                                    principal: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    secured.create_topic("kp")
    producer = KafkaProducer(**kafka_python_config, max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("kp", b"refused").get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    secured.create_acls(*allow(principal, TOPIC, "kp", Op.WRITE, Op.READ))
    producer = KafkaProducer(**kafka_python_config)
    try:
        producer.send("kp", b"ok").get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**kafka_python_config, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT * 1000)
    try:
        consumer.subscribe(["kp"])
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=TIMEOUT * 1000)
    finally:
        consumer.close()
    secured.create_acls(*allow(principal, GROUP, "kp-group", Op.READ))
    consumer = KafkaConsumer(**kafka_python_config, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT * 1000)
    try:
        consumer.subscribe(["kp"])
        assert next(consumer).value == b"ok"
    finally:
        consumer.close()


def test_aiokafka_denials(principal: str) -> None:
    """aiokafka's tests/test_sasl.py denials: ALL allowed, then DENY DESCRIBE on the
    topic (send and consumer start refused), DENY WRITE (send refused), DENY READ
    (getone refused), DENY DESCRIBE on the group (FindCoordinator refused)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import (
        GroupAuthorizationFailedError,
        TopicAuthorizationFailedError,
    )

    from odradek.metadata.acls import AclFilter

    with Broker(**{"authorizer.class.name": STANDARD}) as b:
        b.create_topic("aio")
        everything = [*allow(principal, TOPIC, "*", Op.ALL), *allow(principal, GROUP, "*", Op.ALL)]
        b.create_acls(*everything)
        conf = {"bootstrap_servers": b.bootstrap_servers}

        async def send() -> None:
            p = AIOKafkaProducer(**conf, request_timeout_ms=5000)
            await p.start()
            try:
                await p.send_and_wait("aio", b"x")
            finally:
                await p.stop()

        async def getone(group: str) -> None:
            c = AIOKafkaConsumer("aio", **conf, group_id=group, auto_offset_reset="earliest")
            await c.start()
            try:
                await asyncio.wait_for(c.getone(), TIMEOUT)
            finally:
                await c.stop()

        asyncio.run(send())  # allowed
        b.create_acls(*deny(principal, TOPIC, "aio", Op.DESCRIBE))
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(send())
        b.delete_acls(AclFilter(permission=2))
        b.create_acls(*deny(principal, TOPIC, "aio", Op.WRITE))
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(send())
        b.delete_acls(AclFilter(permission=2))
        b.create_acls(*deny(principal, TOPIC, "aio", Op.READ))
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(getone("aio-1"))
        b.delete_acls(AclFilter(permission=2))
        b.create_acls(*deny(principal, GROUP, "aio-2", Op.DESCRIBE))
        with pytest.raises(GroupAuthorizationFailedError):
            asyncio.run(getone("aio-2"))
        b.delete_acls(AclFilter(permission=2))
        asyncio.run(getone("aio-3"))  # allowed again

"""ACL enforcement seen by confluent-kafka (librdkafka): for each check a
client reaches, a principal without the ACL gets Kafka's error and nothing
changes, and with it succeeds. The principal is the ``principal`` fixture."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from odradek.metadata.acls import AclFilter
from odradek.testing.broker import Broker
from odradek.wire.messages.describe_acls_request import DescribeAclsRequest
from tests.integration.security.aclsupport import (
    GROUP,
    STANDARD,
    TOPIC,
    TXN,
    Op,
    allow,
    deny,
    on_cluster,
    wait_for,
)
from tests.support.rawclient import RawClient

TIMEOUT = 15


def produce(conf: dict[str, Any], topic: str, n: int = 3, **extra: Any) -> list[Any]:
    """Produce ``n`` records; the delivery error of each (None: delivered)."""
    p = Producer({**conf, "message.timeout.ms": 6000, **extra})
    errors: list[Any] = []
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(TIMEOUT) == 0
    return errors


def end_offset(broker: Broker, topic: str, partition: int = 0) -> int:
    """The log end offset, read by the operator (no ACL involved)."""
    part = broker.app.state.partitions.get(topic, partition)
    assert part is not None
    return int(part.state.log_end_offset)


def code(err: Any) -> int:
    return err.code() if isinstance(err, KafkaError) else err.args[0].code()


def test_producer_needs_write_on_the_topic(secured: Broker, client_config: dict[str, Any],
                                           principal: str) -> None:
    secured.create_topic("orders")
    errors = produce(client_config, "orders")
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(secured, "orders") == 0
    secured.create_acls(*allow(principal, TOPIC, "orders", Op.WRITE))
    assert produce(client_config, "orders") == [None] * 3
    assert end_offset(secured, "orders") == 3


def test_deny_beats_allow(secured: Broker, client_config: dict[str, Any],
                          principal: str) -> None:
    secured.create_topic("a")
    secured.create_topic("b")
    secured.create_acls(*allow("User:*", TOPIC, "*", Op.ALL),
                        *deny(principal, TOPIC, "b", Op.WRITE))
    assert produce(client_config, "a", 1) == [None]
    assert [e.code() for e in produce(client_config, "b", 1)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert end_offset(secured, "b") == 0


def test_a_prefixed_acl_covers_the_names_it_starts(secured: Broker,
                                                   client_config: dict[str, Any],
                                                   principal: str) -> None:
    for name in ("pay-eu", "pay-us", "refunds"):
        secured.create_topic(name)
    secured.create_acls(*allow(principal, TOPIC, "pay-", Op.WRITE, prefixed=True))
    assert produce(client_config, "pay-eu", 1) == [None]
    assert produce(client_config, "pay-us", 1) == [None]
    assert [e.code() for e in produce(client_config, "refunds", 1)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_super_users_need_no_acl(principal: str) -> None:
    with Broker(**{"authorizer.class.name": STANDARD, "super.users": f"User:other;{principal}"}
                ) as b:
        b.create_topic("t")
        b.create_acls(*deny(principal, TOPIC, "t", Op.ALL))
        assert produce({"bootstrap.servers": b.bootstrap_servers}, "t", 1) == [None]


def test_metadata_hides_topics_the_principal_may_not_describe(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    for name in ("visible", "hidden"):
        secured.create_topic(name)
    secured.create_acls(*allow(principal, TOPIC, "visible", Op.READ))  # implies DESCRIBE
    admin = AdminClient(client_config)
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert "visible" in topics and "hidden" not in topics
    named = admin.list_topics("hidden", timeout=TIMEOUT).topics["hidden"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert not named.partitions
    # a topic that does not exist is not revealed as missing either
    ghost = admin.list_topics("ghost", timeout=TIMEOUT).topics["ghost"]
    assert ghost.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _consume_error(conf: dict[str, Any], topic: str, group: str) -> int | None:
    """Subscribe and poll until a record (None) or an error (its code)."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                return None
            if m.error().code() != KafkaError._PARTITION_EOF:
                return int(m.error().code())
        raise AssertionError("no record and no error")
    finally:
        c.close()


def test_consumer_needs_read_on_topic_and_group(secured: Broker, client_config: dict[str, Any],
                                                principal: str) -> None:
    secured.create_topic("events")
    secured.create_acls(*allow(principal, TOPIC, "events", Op.WRITE))
    assert produce(client_config, "events", 1) == [None]
    # no ACL on the group: FindCoordinator is refused
    secured.create_acls(*allow(principal, TOPIC, "events", Op.READ))
    assert _consume_error(client_config, "events", "g1") == KafkaError.GROUP_AUTHORIZATION_FAILED
    # the group allowed, READ on the topic denied: it is still seen (DENY READ
    # does not deny DESCRIBE), its partitions refused
    secured.create_acls(*allow(principal, GROUP, "g", Op.READ, prefixed=True),
                        *deny(principal, TOPIC, "events", Op.READ))
    assert _consume_error(client_config, "events", "g2") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    secured.delete_acls(AclFilter(TOPIC, "events", permission=2))
    assert _consume_error(client_config, "events", "g3") is None


def test_transactional_producer_needs_write_on_its_transactional_id(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    secured.create_topic("tx-out")
    secured.create_acls(*allow(principal, TOPIC, "tx-out", Op.WRITE))
    p = Producer({**client_config, "transactional.id": "tx-1"})
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(TIMEOUT)
    assert code(refused.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    secured.create_acls(*allow(principal, TXN, "tx-", Op.WRITE, prefixed=True))
    p = Producer({**client_config, "transactional.id": "tx-2"})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce("tx-out", b"in a transaction")
    p.commit_transaction(TIMEOUT)
    wait_for(lambda: end_offset(secured, "tx-out") == 2, TIMEOUT,
             "the record and its commit marker")


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    secured.create_topic("idem")
    secured.create_acls(*allow(principal, TOPIC, "idem", Op.DESCRIBE))
    # librdkafka: a fatal error, raised by flush. Sent without a delivery callback:
    # raised while a callback runs, it surfaces as a SystemError instead.
    refused = Producer({**client_config, "message.timeout.ms": 6000,
                        "enable.idempotence": True})
    refused.produce("idem", b"v0")
    with pytest.raises(KafkaException) as exc:
        refused.flush(TIMEOUT)
    assert code(exc.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert end_offset(secured, "idem") == 0
    secured.create_acls(*allow(principal, TOPIC, "idem", Op.WRITE))  # KIP-679
    assert produce(client_config, "idem", 2, **{"enable.idempotence": True}) == [None] * 2


def test_admin_topic_operations(secured: Broker, client_config: dict[str, Any],
                                principal: str) -> None:
    admin = AdminClient(client_config)
    # CreateTopics: CREATE on the cluster or on the topic
    f = admin.create_topics([NewTopic("made", 1, 1)])["made"]
    with pytest.raises(KafkaException) as exc:
        f.result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "made" not in secured.app.state.image.topics
    secured.create_acls(*allow(principal, TOPIC, "made", Op.CREATE))
    admin.create_topics([NewTopic("made", 1, 1)])["made"].result(TIMEOUT)
    # CreatePartitions: ALTER on the topic
    f = admin.create_partitions([NewPartitions("made", 2)])["made"]
    with pytest.raises(KafkaException) as exc:
        f.result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(secured.app.state.image.topics["made"].partitions) == 1
    secured.create_acls(*allow(principal, TOPIC, "made", Op.ALTER))
    admin.create_partitions([NewPartitions("made", 2)])["made"].result(TIMEOUT)
    # DeleteRecords: DELETE on the topic
    secured.create_acls(*allow(principal, TOPIC, "made", Op.WRITE))
    assert produce(client_config, "made", 2, partitioner="murmur2") == [None, None]
    # DeleteTopics: DELETE on the topic
    f = admin.delete_topics(["made"])["made"]
    with pytest.raises(KafkaException) as exc:
        f.result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "made" in secured.app.state.image.topics
    secured.create_acls(*allow(principal, TOPIC, "made", Op.DELETE))
    admin.delete_topics(["made"])["made"].result(TIMEOUT)


def test_delete_records_needs_delete_on_the_topic(secured: Broker,
                                                  client_config: dict[str, Any],
                                                  principal: str) -> None:
    secured.create_topic("trim")
    secured.create_acls(*allow(principal, TOPIC, "trim", Op.WRITE))
    assert produce(client_config, "trim", 3) == [None] * 3
    admin = AdminClient(client_config)
    f = admin.delete_records([TopicPartition("trim", 0, 2)])
    with pytest.raises(KafkaException) as exc:
        next(iter(f.values())).result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert secured.app.state.partitions.get("trim", 0).state.log_start_offset == 0
    secured.create_acls(*allow(principal, TOPIC, "trim", Op.DELETE))
    next(iter(admin.delete_records([TopicPartition("trim", 0, 2)]).values())).result(TIMEOUT)
    assert secured.app.state.partitions.get("trim", 0).state.log_start_offset == 2


def test_configs_need_describe_and_alter_configs(secured: Broker, client_config: dict[str, Any],
                                                 principal: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    secured.create_topic("conf")
    admin = AdminClient(client_config)
    res = ConfigResource(ResourceType.TOPIC, "conf")
    with pytest.raises(KafkaException) as exc:
        admin.describe_configs([res])[res].result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_res = ConfigResource(ResourceType.BROKER, "1")
    with pytest.raises(KafkaException) as exc:
        admin.describe_configs([broker_res])[broker_res].result(TIMEOUT)
    assert code(exc.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    change = ConfigResource(ResourceType.TOPIC, "conf", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([change])[change].result(TIMEOUT)
    assert code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "retention.ms" not in secured.app.state.image.topics["conf"].configs
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    secured.create_acls(*allow(principal, TOPIC, "conf", Op.ALTER_CONFIGS))
    admin.incremental_alter_configs([change])[change].result(TIMEOUT)
    described = admin.describe_configs([res])[res].result(TIMEOUT)
    assert described["retention.ms"].value == "1000"


def test_groups_listed_described_and_deleted_by_their_acls(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    secured.create_topic("gt")
    secured.create_acls(*allow(principal, TOPIC, "gt", Op.READ, Op.WRITE),
                        *allow(principal, GROUP, "mine", Op.READ),
                        *allow(principal, GROUP, "theirs", Op.READ))
    assert produce(client_config, "gt", 1) == [None]
    for group in ("mine", "theirs"):
        c = Consumer({**client_config, "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe(["gt"])
        while (m := c.poll(1)) is None or m.error():
            pass
        c.commit(asynchronous=False)
        c.close()
    secured.delete_acls(AclFilter(GROUP, "theirs"))
    admin = AdminClient(client_config)
    listed = {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert listed == {"mine"}  # no DESCRIBE on the cluster: only the groups it may describe
    described = admin.describe_consumer_groups(["mine", "theirs"])
    assert described["mine"].result(TIMEOUT).group_id == "mine"
    with pytest.raises(KafkaException) as exc:
        described["theirs"].result(TIMEOUT)
    assert code(exc.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        admin.delete_consumer_groups(["mine"])["mine"].result(TIMEOUT)
    assert code(exc.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    secured.create_acls(*allow(principal, GROUP, "mine", Op.DELETE))
    admin.delete_consumer_groups(["mine"])["mine"].result(TIMEOUT)
    secured.create_acls(*on_cluster(principal, Op.DESCRIBE))
    listed = {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert listed == {"theirs"}


def test_describe_cluster_reports_authorized_operations(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    from confluent_kafka import admin as ck
    admin = AdminClient(client_config)
    described = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert not described.authorized_operations  # 0: librdkafka gives None
    secured.create_acls(*on_cluster(principal, Op.ALTER, Op.DESCRIBE))
    described = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert set(described.authorized_operations) == {ck.AclOperation.ALTER,
                                                    ck.AclOperation.DESCRIBE}


def test_cluster_level_admin_apis_need_their_cluster_acl(
        secured: Broker, client_config: dict[str, Any], principal: str) -> None:
    from confluent_kafka import admin as ck
    admin = AdminClient(client_config)
    everything = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY,
                                     None, None, ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    # librdkafka does not surface DescribeAcls' top-level error: asked raw
    assert describe_acls_error(secured) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    binding = ck.AclBinding(ck.ResourceType.TOPIC, "x", ck.ResourcePatternType.LITERAL,
                            "User:bob", "*", ck.AclOperation.READ, ck.AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as exc:
        admin.create_acls([binding])[binding].result(TIMEOUT)
    assert code(exc.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert len(secured.app.state.image.acls) == 0
    secured.create_acls(*on_cluster(principal, Op.ALTER))  # ALTER implies DESCRIBE
    admin.create_acls([binding])[binding].result(TIMEOUT)
    assert describe_acls_error(secured) == 0
    assert len(admin.describe_acls(everything).result(TIMEOUT)) == 2


def test_acl_apis_answer_security_disabled_without_an_authorizer() -> None:
    from confluent_kafka import admin as ck
    with Broker() as b:
        assert describe_acls_error(b) == KafkaError.SECURITY_DISABLED
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        binding = ck.AclBinding(ck.ResourceType.TOPIC, "x", ck.ResourcePatternType.LITERAL,
                                "User:bob", "*", ck.AclOperation.READ, ck.AclPermissionType.ALLOW)
        with pytest.raises(KafkaException) as exc:
            admin.create_acls([binding])[binding].result(TIMEOUT)
        assert code(exc.value) == KafkaError.SECURITY_DISABLED


def describe_acls_error(broker: Broker) -> int:
    """DescribeAcls' top-level error for an all-ANY filter, asked raw."""
    raw = RawClient(broker.bootstrap_servers)
    try:
        answer = raw.request(DescribeAclsRequest(1, None, 1, None, None, 1, 1), 3)
    finally:
        raw.close()
    return int(answer.error_code)


def test_kcat_lists_only_describable_topics(secured: Broker, client_config: dict[str, Any],
                                            principal: str) -> None:
    import json
    import shutil
    import subprocess
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat not installed")
    for name in ("seen", "unseen"):
        secured.create_topic(name)
    secured.create_acls(*allow(principal, TOPIC, "seen", Op.DESCRIBE))
    settings = [arg for k, v in client_config.items() if k != "bootstrap.servers"
                for arg in ("-X", f"{k}={v}")]
    out = subprocess.run([kcat, "-b", client_config["bootstrap.servers"], *settings, "-L", "-J"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert [t["topic"] for t in json.loads(out)["topics"]] == ["seen"]

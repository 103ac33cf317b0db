"""A 3-node cluster secured end to end: SASL_SSL on every listener (SCRAM-SHA-512
between brokers and for clients, PLAIN between controllers) and ACLs on.

SCRAM users and ACLs created through one node are enforced by every node; a
node killed with SIGKILL and restarted authenticates and authorizes from its
own metadata log; clients stay authenticated and authorized throughout, and
nothing acknowledged is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.testing.cluster import LocalCluster, wait_for
from odradek.testing.secure_cluster import SASL_USERS
from tests.support.cluster import assert_no_tracebacks, running

TOPIC = "secured"
GROUP = "alice-readers"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, controllers=3, sasl=True)
    with running(c):
        yield c
    assert_no_tracebacks(c)
    for node in c.nodes.values():
        text = node.log_path.read_text(errors="replace")
        for secret in (*SASL_USERS.values(), *PASSWORDS.values()):
            assert secret not in text, f"node {node.node_id} logged a password"


def settings(cluster: LocalCluster, user: str, password: str,
             bootstrap: str | None = None) -> dict[str, Any]:
    assert cluster.certs is not None
    return {"bootstrap.servers": bootstrap or cluster.bootstrap,
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": cluster.certs.ca}


def only(cluster: LocalCluster, node_id: int) -> str:
    return f"localhost:{cluster.nodes[node_id].client_port}"


def produce(config: dict[str, Any], values: list[bytes], timeout_s: float = 30
            ) -> list[KafkaError | None]:
    """Produce with acks=all and idempotence; the delivery error of each value."""
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(timeout_s * 1000)})
    for v in values:
        producer.produce(TOPIC, v, key=v,
                         on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(timeout_s + 5)
    return errors


def test_sasl_ssl_cluster_with_acls_survives_a_kill_and_restart(cluster: LocalCluster) -> None:
    admin_conf = settings(cluster, "admin", SASL_USERS["admin"], only(cluster, 1))
    admin = AdminClient(admin_conf)

    def registered() -> bool | None:
        return len(admin.list_topics(timeout=5).brokers) == 3 or None

    wait_for("3 brokers registered over SASL_SSL", registered, 90)
    for fut in admin.create_topics([NewTopic(TOPIC, 3, 3, config={
            "min.insync.replicas": "2"})]).values():
        fut.result(timeout=30)
    # Users and ACLs through node 1 only.
    ups = [UserScramCredentialUpsertion(user, ScramCredentialInfo(
        ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        for user, password in PASSWORDS.items()]
    for fut in admin.alter_user_scram_credentials(ups).values():
        fut.result(timeout=30)
    acls = [AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                       AclPermissionType.ALLOW)
            for rtype, name, op in ((ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
                                    (ResourceType.TOPIC, TOPIC, AclOperation.READ),
                                    (ResourceType.GROUP, GROUP, AclOperation.READ))]
    for fut in admin.create_acls(acls).values():
        fut.result(timeout=30)

    acked: list[bytes] = []

    def alice_writes_through(node_id: int, tag: str) -> None:
        values = [f"{tag}-{i}".encode() for i in range(30)]

        def done() -> bool | None:
            errors = produce(settings(cluster, "alice", PASSWORDS["alice"],
                                      only(cluster, node_id)), values[:1], 15)
            return errors == [None] or None

        # The user and ACLs reach every node through the metadata log.
        wait_for(f"alice may write through node {node_id}", done, 60)
        acked.append(values[0])
        errors = produce(settings(cluster, "alice", PASSWORDS["alice"],
                                  only(cluster, node_id)), values[1:])
        assert errors == [None] * (len(values) - 1), errors
        acked.extend(values[1:])

    def bob_is_refused_by(node_id: int) -> None:
        errors = produce(settings(cluster, "bob", PASSWORDS["bob"], only(cluster, node_id)),
                         [b"bob"], 15)
        assert len(errors) == 1 and errors[0] is not None
        assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]

    def wrong_password_fails_on(node_id: int) -> None:
        failures: list[KafkaError] = []
        producer = Producer({**settings(cluster, "alice", "not-her-password",
                                        only(cluster, node_id)),
                             "error_cb": failures.append, "message.timeout.ms": 5000})
        producer.produce(TOPIC, b"never")
        producer.flush(10)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in failures), failures

    for node_id in (1, 2, 3):
        alice_writes_through(node_id, f"before-{node_id}")
        bob_is_refused_by(node_id)
        wrong_password_fails_on(node_id)

    # A consumer and a producer that stay connected through the kill and restart.
    consumer = Consumer({**settings(cluster, "alice", PASSWORDS["alice"]),
                         "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got: set[bytes] = set()

    def consume_until(wanted: set[bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not wanted <= got and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().retriable() or \
                msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if msg.error() is None:
                got.add(msg.value())
        assert wanted <= got, f"{len(wanted - got)} acknowledged records never read"

    try:
        consume_until(set(acked), 60)
        survivor = Producer({**settings(cluster, "alice", PASSWORDS["alice"]),
                             "acks": "all", "enable.idempotence": True,
                             "message.timeout.ms": 60000})
        failed: list[KafkaError] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())
            else:
                failed.append(err)

        cluster.kill(2)
        for i in range(60):
            survivor.produce(TOPIC, f"during-{i}".encode(), on_delivery=delivered)
            survivor.poll(0.05)
        assert survivor.flush(90) == 0
        assert failed == []
        cluster.start(2)
        # The restarted node knows alice, her ACLs and bob's lack of them from
        # its own log, and serves again.
        alice_writes_through(2, "after")
        bob_is_refused_by(2)
        for i in range(30):
            survivor.produce(TOPIC, f"after-restart-{i}".encode(), on_delivery=delivered)
        assert survivor.flush(60) == 0
        assert failed == []
        consume_until(set(acked), 90)
    finally:
        consumer.close()

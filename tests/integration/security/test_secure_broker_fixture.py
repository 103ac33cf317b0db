"""The test Broker secured in one line (``Broker(ssl=True, sasl=..., acls=True)``,
the ``odradek_secure_broker`` fixture): the admin may do everything, another
user only what an ACL allows, and a wrong password is refused."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.metadata.acls import AclBinding as OdradekAcl
from odradek.testing.broker import Broker


def _deliver(config: dict[str, str], topic: str, value: bytes) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 15000})
    producer.produce(topic, value, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1
    return errors[0]


def test_the_secure_fixture_is_sasl_ssl_with_acls(odradek_secure_broker: Broker) -> None:
    admin_conf = odradek_secure_broker.client_config()
    assert admin_conf["security.protocol"] == "SASL_SSL"
    admin = AdminClient(admin_conf)
    admin.create_topics([NewTopic("fixture-t", 1, 1)])["fixture-t"].result(30)
    assert _deliver(admin_conf, "fixture-t", b"by the admin") is None
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        assert _deliver(odradek_secure_broker.client_config(mechanism=mechanism),
                        "fixture-t", mechanism.encode()) is None


def test_named_users_need_acls_and_their_passwords() -> None:
    with Broker(sasl={"alice": "alice-pw", "bob": "bob-pw"}, acls=True) as b:
        b.create_topic("t")
        b.create_acls(*[  # (topic "t", literal, alice, any host, WRITE/READ, allow)
            OdradekAcl(2, "t", 3, "User:alice", "*", op, 3) for op in (4, 3)])
        alice = b.client_config(user="alice")
        assert alice["security.protocol"] == "SASL_PLAINTEXT"
        assert _deliver(alice, "t", b"alice") is None
        err = _deliver(b.client_config(user="bob"), "t", b"bob")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        failures: list[KafkaError] = []
        consumer = Consumer({**alice, "sasl.password": "wrong", "group.id": "g",
                             "error_cb": failures.append})
        try:
            consumer.list_topics(timeout=5)
        except Exception:  # the metadata call fails too; the error callback says why
            pass
        finally:
            consumer.close()
        assert any(e.code() == KafkaError._AUTHENTICATION for e in failures), failures

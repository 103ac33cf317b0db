"""Real clients produce and consume over SASL_PLAINTEXT with each mechanism:
confluent-kafka (librdkafka), kafka-python, aiokafka and kcat."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest

from odradek.testing.broker import Broker
from tests.integration.security.sasl_support import unsecured_jws

MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
KCAT = shutil.which("kcat")


def _topic(broker: Broker) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, 2)
    return name


def _librdkafka(broker: Broker, mech: str, password: str = "alice-secret") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": broker.bootstrap_servers,
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech}
    if mech == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": "principal=alice"})
    else:
        conf.update({"sasl.username": "alice", "sasl.password": password})
    return conf


@pytest.mark.parametrize("mech", MECHS)
def test_confluent_kafka_produces_and_consumes(sasl_broker: Broker, mech: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic = _topic(sasl_broker)
    producer = Producer(_librdkafka(sasl_broker, mech))
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**_librdkafka(sasl_broker, mech), "group.id": f"g-{mech}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.add(msg.value())
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert got == {f"v{i}".encode() for i in range(20)}


def _kafka_python_conf(broker: Broker, mech: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_servers,
                            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self) -> str:
                return unsecured_jws("alice")

        conf["sasl_oauth_token_provider"] = Provider()
    else:
        conf.update({"sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})
    return conf


@pytest.mark.parametrize("mech", MECHS)
def test_kafka_python_produces_and_consumes(sasl_broker: Broker, mech: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(sasl_broker)
    producer = KafkaProducer(**_kafka_python_conf(sasl_broker, mech))
    for i in range(20):
        producer.send(topic, f"v{i}".encode()).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, **_kafka_python_conf(sasl_broker, mech),
                             auto_offset_reset="earliest")
    got: set[bytes] = set()
    try:
        for _ in range(100):
            batch = consumer.poll(timeout_ms=200)
            got |= {m.value for msgs in batch.values() for m in msgs}
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert got == {f"v{i}".encode() for i in range(20)}


@pytest.mark.parametrize("mech", MECHS)
def test_aiokafka_produces_and_consumes(sasl_broker: Broker, mech: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_jws("alice")

    conf: dict[str, Any] = {"bootstrap_servers": sasl_broker.bootstrap_servers,
                            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        conf["sasl_oauth_token_provider"] = Provider()
    else:
        conf.update({"sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})
    topic = _topic(sasl_broker)

    async def run() -> set[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **conf, auto_offset_reset="earliest")
        await consumer.start()
        got: set[bytes] = set()
        try:
            while len(got) < 20:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                got |= {m.value for msgs in batch.values() for m in msgs if m.value}
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == {f"v{i}".encode() for i in range(20)}


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_kcat_produces_and_consumes(sasl_broker: Broker, mech: str) -> None:
    assert KCAT is not None
    topic = _topic(sasl_broker)
    conf = [f"{k}={v}" for k, v in _librdkafka(sasl_broker, mech).items()
            if k != "bootstrap.servers"]
    args = [KCAT, "-b", sasl_broker.bootstrap_servers]
    for item in conf:
        args += ["-X", item.replace("True", "true")]
    lines = "\n".join(f"m{i}" for i in range(10)) + "\n"
    out = subprocess.run([*args, "-P", "-t", topic, "-p", "0"], input=lines, text=True,
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([*args, "-C", "-t", topic, "-p", "0", "-e", "-f", "%s\n"], text=True,
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"m{i}" for i in range(10)]


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_an_authentication_error(sasl_broker: Broker, mech: str) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**_librdkafka(sasl_broker, mech, password="wrong"),
                         "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.close()
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()


"""Real clients over SSL listeners: confluent-kafka, kafka-python, aiokafka and kcat,
with and without client certificates, every keystore format, large fetches
over TLS on both event loops, and bad input against the TLS port."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from odradek.broker.config import ConfigError
from odradek.testing.broker import Broker
from odradek.testing.certs import PASSWORD

KCAT = shutil.which("kcat")


def _principals(broker: Broker) -> set[str]:
    server = broker.app.server
    assert server is not None
    return {c.principal for c in list(server.connections)}


def _wait(condition, timeout_s: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _produce(conf: dict[str, str], topic: str, values: list[bytes]) -> None:
    producer = Producer({**conf, "linger.ms": "5"})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0


def _consume(conf: dict[str, str], topic: str, n: int, group: str = "g") -> list[bytes]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": "false"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.fixture
def ssl_broker() -> Iterator[Broker]:
    with Broker(ssl=True, **{"ssl.client.auth": "requested",
                             "ssl.principal.mapping.rules": "RULE:^CN=(.*?)$/$1/U,DEFAULT"}) as b:
        yield b


def test_confluent_with_and_without_certificate_and_mapped_principal(ssl_broker: Broker) -> None:
    ssl_broker.create_topic("t")
    values = [f"v{i}".encode() for i in range(50)]
    _produce(ssl_broker.client_config(), "t", values)
    assert _consume(ssl_broker.client_config(certificate=False), "t", 50) == values
    # A connected certificate client's principal is its mapped subject.
    admin = AdminClient(ssl_broker.client_config())
    admin.list_topics(timeout=10)
    _wait(lambda: "User:CLIENT" in _principals(ssl_broker))
    anonymous = AdminClient(ssl_broker.client_config(certificate=False))
    anonymous.list_topics(timeout=10)
    _wait(lambda: "User:ANONYMOUS" in _principals(ssl_broker))


def test_client_auth_required_refuses_a_client_without_certificate() -> None:
    with Broker(ssl=True, **{"ssl.client.auth": "required"}) as broker:
        broker.create_topic("t")
        refused = AdminClient({**broker.client_config(certificate=False),
                               "socket.timeout.ms": "2000"})
        with pytest.raises(KafkaException):
            refused.list_topics(timeout=3)
        _produce(broker.client_config(), "t", [b"still serving"])
        assert _consume(broker.client_config(), "t", 1) == [b"still serving"]
        _wait(lambda: _principals(broker) <= {"User:CN=client"})


def test_client_that_does_not_trust_the_broker_is_refused(tmp_path: Path) -> None:
    from odradek.testing.certs import write_dev_certs

    other = write_dev_certs(tmp_path)
    with Broker(ssl=True) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                             "security.protocol": "SSL", "ssl.ca.location": other.ca})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)


@pytest.mark.parametrize("keystore", ["pem-file", "inline-pem", "pkcs12"])
def test_keystore_formats(keystore: str) -> None:
    with Broker(ssl=True) as plain:  # only for its certificates
        certs = plain.certs
        assert certs is not None
        settings = {
            "pem-file": {"ssl.keystore.type": "PEM",
                         "ssl.keystore.location": certs.path("broker-keystore.pem")},
            "inline-pem": {"ssl.keystore.type": "PEM", "ssl.keystore.location": "",
                           "ssl.keystore.key": Path(certs.path("broker.key")).read_text(),
                           "ssl.keystore.certificate.chain":
                               Path(certs.path("broker.pem")).read_text()},
            "pkcs12": {"ssl.keystore.type": "PKCS12",
                       "ssl.keystore.location": certs.path("broker.p12"),
                       "ssl.keystore.password": PASSWORD},
        }[keystore]
        with Broker(**{"listeners": "SSL://127.0.0.1:0",
                       "advertised.listeners": "SSL://localhost:0", **settings}) as broker:
            broker.create_topic("k")
            conf = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
                    "ssl.ca.location": certs.ca}
            _produce(conf, "k", [keystore.encode()])
            assert _consume(conf, "k", 1) == [keystore.encode()]


def test_kafka_python_over_ssl(ssl_broker: Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    ssl_broker.create_topic("kp")
    kw = {"bootstrap_servers": ssl_broker.bootstrap_servers, "security_protocol": "SSL",
          "ssl_cafile": ssl_broker.ssl_ca, "ssl_certfile": ssl_broker.ssl_certfile,
          "ssl_keyfile": ssl_broker.ssl_keyfile}
    producer = KafkaProducer(**kw)
    for i in range(20):
        producer.send("kp", f"kp{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **kw)
    got = [m.value for _, m in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert got == [f"kp{i}".encode() for i in range(20)]


def test_aiokafka_over_ssl(ssl_broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    ssl_broker.create_topic("ak")

    async def run() -> list[bytes]:
        context = create_ssl_context(cafile=ssl_broker.ssl_ca, certfile=ssl_broker.ssl_certfile,
                                     keyfile=ssl_broker.ssl_keyfile)
        kw = {"bootstrap_servers": ssl_broker.bootstrap_servers, "security_protocol": "SSL",
              "ssl_context": context}
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("ak", f"ak{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("ak", auto_offset_reset="earliest", **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < 20:
                    batch = await consumer.getmany(timeout_ms=500)
                    got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"ak{i}".encode() for i in range(20)]


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_over_ssl(ssl_broker: Broker) -> None:
    assert KCAT is not None
    args = [KCAT, "-b", ssl_broker.bootstrap_servers, "-X", "security.protocol=ssl",
            "-X", f"ssl.ca.location={ssl_broker.ssl_ca}",
            "-X", f"ssl.certificate.location={ssl_broker.ssl_certfile}",
            "-X", f"ssl.key.location={ssl_broker.ssl_keyfile}"]
    lines = [f"line {i}" for i in range(30)]
    out = subprocess.run([*args, "-P", "-t", "kc"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    got = subprocess.run([*args, "-C", "-t", "kc", "-e", "-f", "%s\n"], capture_output=True,
                         text=True, timeout=30)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == lines


@pytest.mark.parametrize("use_uvloop", [False, True], ids=["asyncio", "uvloop"])
def test_large_fetch_over_tls_returns_the_bytes(use_uvloop: bool) -> None:
    """Fetch responses well over the copy threshold: the slices go through the TLS
    transport (a sendfile to the raw socket would corrupt the stream)."""
    with Broker(ssl=True, use_uvloop=use_uvloop) as broker:
        broker.create_topic("big")
        values = [os.urandom(1024) for _ in range(12_000)]
        conf = broker.client_config()
        _produce({**conf, "batch.size": "262144", "linger.ms": "20"}, "big", values)
        got = _consume({**conf, "fetch.max.bytes": "8388608",
                        "max.partition.fetch.bytes": "4194304"}, "big", len(values))
        assert len(got) == len(values)
        assert hashlib.sha256(b"".join(got)).digest() == hashlib.sha256(b"".join(values)).digest()


def _closed_by_peer(sock: socket.socket, timeout_s: float = 15.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("payload", [
    bytes.fromhex("0000001f00120003000000010009636f6e73756d65720004302e3100"),  # ApiVersions
    os.urandom(4096),
    b"\x16\x03\x01\x00\x05hello",  # a TLS record header with a bogus handshake
], ids=["plaintext-kafka", "random-bytes", "bad-handshake"])
def test_non_tls_bytes_on_the_tls_port_close_the_connection(
    ssl_broker: Broker, payload: bytes
) -> None:
    port = ssl_broker.bootstrap_servers.rsplit(":", 1)[1]
    with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as sock:
        sock.sendall(payload)
        assert _closed_by_peer(sock)
    ssl_broker.create_topic("after")
    _produce(ssl_broker.client_config(), "after", [b"ok"])
    assert _consume(ssl_broker.client_config(), "after", 1) == [b"ok"]


@pytest.mark.parametrize(("settings", "named"), [
    ({"ssl.keystore.location": "/nonexistent/broker.p12"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.password": "wrong"},
     "ssl.keystore.password"),
])
def test_bad_keystore_stops_start_up_with_one_line(
    settings: dict[str, str], named: str
) -> None:
    with Broker(ssl=True) as good:
        certs = good.certs
        assert certs is not None
        props = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location":
                 certs.path("broker.p12"), **settings}
        with pytest.raises(ConfigError) as info:
            Broker(**props).start()
        assert named in str(info.value) and "\n" not in str(info.value)


def test_serve_with_a_bad_keystore_exits_with_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        ["python3", "-m", "odradek", "serve", "--log-dirs", str(tmp_path / "data"),
         "--override", "listeners=SSL://127.0.0.1:0",
         "--override", "ssl.keystore.location=/nonexistent/ks.p12"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert out.returncode != 0
    assert "ssl.keystore.location" in out.stderr
    assert "Traceback" not in out.stderr
    assert len([line for line in out.stderr.splitlines() if "odradek:" in line]) == 1


def test_pytest_fixture_serves_ssl(odradek_ssl_broker: Broker) -> None:
    odradek_ssl_broker.create_topic("fx")
    _produce(odradek_ssl_broker.client_config(), "fx", [b"fixture"])
    assert _consume(odradek_ssl_broker.client_config(), "fx", 1) == [b"fixture"]


def test_metadata_names_the_endpoints_of_the_listener_the_client_came_in_on() -> None:
    """PLAINTEXT and SSL listeners on one broker: each client is sent to its own kind."""
    with Broker(ssl=True, **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0,SSL://localhost:0"}) as broker:
        plain, secure = broker.bootstrap_servers.split(",")
        assert secure.startswith("localhost:")
        broker.create_topic("two")
        conf = {**broker.client_config(), "bootstrap.servers": secure}
        brokers = AdminClient(conf).list_topics(timeout=10).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [secure]
        plain_brokers = AdminClient({"bootstrap.servers": plain}).list_topics(timeout=10).brokers
        assert [f"{b.host}:{b.port}" for b in plain_brokers.values()] == [plain]
        _produce(conf, "two", [b"tls"])
        _produce({"bootstrap.servers": plain}, "two", [b"plain"])
        assert sorted(_consume(conf, "two", 2)) == [b"plain", b"tls"]

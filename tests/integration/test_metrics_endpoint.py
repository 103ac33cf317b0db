"""The metrics and health endpoint (``odradek.metrics.listener``) of a real broker,
read over HTTP while real clients produce and consume: Kafka's metric names
as jmx_exporter gives them, /healthz and /readyz, and HTTP clients that are
malformed, oversized or slow, which must not stall the Kafka listeners."""

from __future__ import annotations

import re
import socket
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek.testing import Broker
from odradek.testing.cluster import wait_for

pytestmark = pytest.mark.timeout(180)

DOCS = Path(__file__).parents[2] / "docs" / "operations.md"

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$")


def scrape(url: str) -> dict[str, float]:
    """Every series of a Prometheus text page: ``name{labels}`` → value."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = _LINE.match(line)
            assert m is not None, f"not a sample line: {line!r}"
            out[m.group(1)] = float(m.group(2))
    return out


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def raw(port: int, data: bytes, timeout_s: float = 60) -> bytes:
    """Send ``data`` to the endpoint and read until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_broker_reports_what_it_served_under_kafka_names() -> None:
    topic = f"m-{uuid.uuid4().hex[:8]}"
    with Broker(**{"odradek.metrics.listener": "127.0.0.1:0"}) as broker:
        assert broker.app.endpoint is not None
        base = f"http://{broker.app.endpoint.address}"
        assert get(base + "/healthz") == (200, "ok\n")
        assert get(base + "/readyz") == (200, "ready\n")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(50):
            producer.produce(topic, value=b"v" * 100, key=str(i).encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                             "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[object] = []

        def consumed() -> bool:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg)
            return len(got) >= 50
        try:
            wait_for("50 records consumed", consumed, 60, interval_s=0)
        finally:
            consumer.close()
        m = scrape(base + "/metrics")
        t = f'{{topic="{topic}"}}'
        assert m[f"kafka_server_brokertopicmetrics_messagesin_total{t}"] == 50
        assert m['kafka_server_brokertopicmetrics_messagesin_total{topic=""}'] == 50
        assert m[f"kafka_server_brokertopicmetrics_bytesin_total{t}"] > 50 * 100
        assert m[f"kafka_server_brokertopicmetrics_bytesout_total{t}"] > 50 * 100
        produces = sum(v for k, v in m.items() if k.startswith(
            'kafka_network_requestmetrics_requests_total{request="Produce",'))
        assert produces >= 1
        assert m['kafka_network_requestmetrics_totaltimems_count{request="Produce"}'] == produces
        assert 'kafka_network_requestmetrics_totaltimems{request="Fetch",quantile="0.99"}' in m
        assert m["kafka_server_replicamanager_leadercount"] >= 1
        assert m["kafka_server_replicamanager_underreplicatedpartitions"] == 0
        assert m["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert m["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        assert m[f'kafka_log_log_size{{topic="{topic}",partition="0"}}'] > 50 * 100
        assert m[f'kafka_log_log_logendoffset{{topic="{topic}",partition="0"}}'] == 50
        assert m['kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'] >= 1
        free = [v for k, v in m.items() if k.startswith("odradek_log_dir_free_bytes{")]
        assert len(free) == 1 and free[0] > 0
        # Every metric docs/operations.md names is exported.
        with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
            families = set(re.findall(r"^# TYPE (\S+) ", resp.read().decode(), re.M))
        documented = set(re.findall(r"^\| `((?:kafka|odradek)_[a-z_]+)`", DOCS.read_text(),
                                    re.M))
        assert len(documented) > 25 and documented <= families, documented - families



def test_bad_http_clients_are_refused_or_timed_out_while_kafka_clients_keep_producing(
        ) -> None:
    """On uvloop, as ``odradek serve`` runs: 70 connections that send half a
    request head and wait (more than the endpoint's 64: the rest are closed on
    accept), an oversized head, a malformed one and a POST. Meanwhile a
    producer's records keep being acknowledged; the slow connections are
    answered 408 once their read deadline passes, and the endpoint serves again."""
    topic = f"h-{uuid.uuid4().hex[:8]}"
    with Broker(use_uvloop=True, **{"odradek.metrics.listener": "127.0.0.1:0"}) as broker:
        endpoint = broker.app.endpoint
        assert endpoint is not None
        port = endpoint.http.port
        delivered: list[int] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                          "linger.ms": 5})

            def report(err: object, _msg: object) -> None:
                (failed.append(str(err)) if err else delivered.append(1))
            while not stop.is_set():
                p.produce(topic, b"x" * 200, on_delivery=report)
                p.poll(0.01)
            p.flush(30)
        producing = threading.Thread(target=produce, daemon=True)
        producing.start()
        slow: list[socket.socket] = []
        try:
            wait_for("records acknowledged", lambda: len(delivered) >= 100, 60)
            for _ in range(70):
                s = socket.create_connection(("127.0.0.1", port), timeout=60)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: slo")
                slow.append(s)
            wait_for("connections over the cap closed on accept",
                     lambda: endpoint.http.refused >= 6, 60)
            before = len(delivered)
            wait_for("records acknowledged while the slow clients hang",
                     lambda: len(delivered) >= before + 500, 60)
            answers = []
            for s in slow:
                chunks = []
                try:
                    while chunk := s.recv(65536):
                        chunks.append(chunk)
                except ConnectionResetError:
                    # closed on accept before its half head was read: the
                    # kernel resets instead of a FIN (closed all the same)
                    assert not chunks
                answers.append(b"".join(chunks))
            timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408 ")]
            assert len(timed_out) == 64 and endpoint.http.refused == 6
            assert all(a == b"" for a in answers if not a.startswith(b"HTTP/1.1 408 "))
            assert raw(port, b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\n\r\n").startswith(
                b"HTTP/1.1 431 ")
            assert raw(port, b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").startswith(
                b"HTTP/1.1 400 ")
            assert raw(port, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
            assert raw(port, b"GET /nowhere HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 404 ")
            assert get(f"http://{endpoint.address}/healthz") == (200, "ok\n")
            before = len(delivered)
            wait_for("records acknowledged after", lambda: len(delivered) >= before + 100, 60)
        finally:
            stop.set()
            producing.join(60)
            for s in slow:
                s.close()
        assert failed == []


def test_readiness_says_why_not_before_the_start_and_while_stopping() -> None:
    broker = Broker(**{"odradek.metrics.listener": "127.0.0.1:0"})
    assert broker.app.readiness() == "starting: the Kafka listeners are not open yet"
    with broker:
        assert broker.app.readiness() is None
    assert broker.app.readiness() == "stopping"
    assert broker.app.endpoint is None


def test_a_metrics_port_in_use_stops_the_start_naming_the_key() -> None:
    from odradek.broker.config import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=r"^odradek\.metrics\.listener: cannot listen on "):
            Broker(**{"odradek.metrics.listener": f"127.0.0.1:{port}"}).start()


def test_without_the_key_there_is_no_endpoint_and_no_kafka_families() -> None:
    with Broker() as broker:
        assert broker.app.endpoint is None
        assert not any(n.startswith("kafka_server") for n in broker.app.metrics.families)

"""Client quotas with real clients over real sockets.

A producer limited to 1 MB/s is held to it (measured from acknowledged bytes)
and told so (librdkafka's throttle statistics) while an unlimited producer on
the same broker is not; a consumer limited to 1 MB/s likewise; request time
and connection-rate quotas; the protocol (DescribeClientQuotas,
AlterClientQuotas) with its errors and bad input; quotas survive a restart;
the ``odradek quotas`` command line.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from odradek.wire.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from odradek.wire.messages.metadata_request import MetadataRequest
from tests.support.rawclient import RawClient

MB = 1_000_000
# Three 1 s windows: the first-window burst a new client is allowed is 2 s of
# its quota (Kafka's default of 11 windows would allow 10 s), so a 12 s test
# sees the steady rate.
WINDOWS = {"quota.window.num": "3", "quota.window.size.seconds": "1"}


def alter(client: RawClient, entity: list[tuple[str, str | None]],
          ops: list[tuple[str, float, bool]], validate_only: bool = False) -> list[int]:
    resp = client.request(AlterClientQuotasRequest(validate_only=validate_only, entries=[
        EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  ops=[OpData(key=k, value=v, remove=r) for k, v, r in ops])]), 1)
    return [e.error_code for e in resp.entries]


def describe(client: RawClient, components: list[tuple[str, int, str | None]] | None = None,
             strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    resp = client.request(DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=t, match_type=m, match=n)
                    for t, m, n in components or []], strict=strict), 1)
    assert resp.error_code == 0, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in resp.entries}


class Measured:
    """A confluent-kafka producer sending 10 KB records as fast as it can, counting
    acknowledged bytes over time and the broker's throttle from librdkafka's stats."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.acked: list[tuple[float, int]] = []
        self.max_throttle = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
            "statistics.interval.ms": 500, "stats_cb": self._stats,
            "queue.buffering.max.kbytes": 4096, "acks": 1,
        })
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _stats(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            self.max_throttle = max(self.max_throttle, broker.get("throttle", {}).get("max", 0))

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.append((time.monotonic(), len(msg.value())))  # type: ignore[attr-defined]

    def _run(self) -> None:
        value = b"v" * 10_000
        while not self.stop.is_set():
            try:
                self.producer.produce("q", value, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.01)
                continue
            self.producer.poll(0)
        self.producer.flush(30)

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.acked if start <= t < end) / (end - start)


@pytest.mark.slow  # long for the fast tier (scripts/test.sh --fast)
@pytest.mark.timing  # rates over wall-clock windows: run alone (scripts/test.sh)
def test_producer_byte_rate_holds_a_producer_to_its_quota_and_not_its_neighbour() -> None:
    with Broker(**WINDOWS) as broker:
        broker.create_topic("q", partitions=1)
        admin = RawClient(broker.bootstrap_servers)
        assert alter(admin, [("client-id", "limited")], [("producer_byte_rate", MB, False)]) == [0]
        limited = Measured(broker.bootstrap_servers, "limited")
        free = Measured(broker.bootstrap_servers, "free")
        t0 = time.monotonic()
        limited.thread.start()
        free.thread.start()
        deadline = t0 + 13
        while time.monotonic() < deadline:
            time.sleep(0.2)
        for m in (limited, free):
            m.stop.set()
        for m in (limited, free):
            m.thread.join(60)
        steady = limited.rate(t0 + 3, t0 + 13)  # past the first windows' burst
        # The quota is a ceiling, held tight; the floor only says the throttle does not
        # starve the client (a loaded 2-core CI machine slowed an unthrottled-enough
        # client below 0.7x of its quota, with no fault of the broker's).
        assert 0.5 * MB <= steady <= 1.2 * MB, f"limited producer: {steady / MB:.2f} MB/s"
        assert limited.max_throttle > 0  # the broker said so, in throttle_time_ms
        assert free.max_throttle == 0
        assert free.rate(t0 + 3, t0 + 13) > 3 * MB
        server = broker.app.server
        assert server is not None and server.stats["throttled"] > 0
        admin.close()


@pytest.mark.slow  # long for the fast tier (scripts/test.sh --fast)
@pytest.mark.timing  # rates over wall-clock windows: run alone (scripts/test.sh)
def test_consumer_byte_rate_holds_a_consumer_to_its_quota() -> None:
    with Broker(**WINDOWS) as broker:
        broker.create_topic("q", partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for _ in range(1200):
            producer.produce("q", b"r" * 10_000)
            producer.poll(0)
        assert producer.flush(30) == 0
        admin = RawClient(broker.bootstrap_servers)
        assert alter(admin, [("client-id", "reader")], [("consumer_byte_rate", MB, False)]) == [0]

        def consume(client_id: str, seconds: float) -> list[tuple[float, int]]:
            consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                 "client.id": client_id, "group.id": client_id,
                                 "enable.auto.commit": False, "fetch.max.bytes": 200_000,
                                 "message.max.bytes": 200_000,
                                 "max.partition.fetch.bytes": 200_000})
            consumer.assign([TopicPartition("q", 0, 0)])
            got: list[tuple[float, int]] = []
            end = time.monotonic() + seconds
            while time.monotonic() < end and sum(n for _, n in got) < 12 * MB:
                for m in consumer.consume(100, 0.2):
                    if m.error() is None:
                        got.append((time.monotonic(), len(m.value())))
            consumer.close()
            return got

        t0 = time.monotonic()
        got = consume("reader", 8)
        steady = sum(n for t, n in got if t0 + 3 <= t < t0 + 8) / 5
        # A ceiling held tight, a floor that only says it is not starved (see above).
        assert 0.5 * MB <= steady <= 1.3 * MB, f"limited consumer: {steady / MB:.2f} MB/s"
        t1 = time.monotonic()
        free = consume("unlimited", 8)
        assert sum(n for _, n in free) == 12 * MB and free[-1][0] - t1 < 4  # not held back
        admin.close()


def test_request_percentage_throttles_a_busy_client() -> None:
    with Broker(**WINDOWS) as broker:
        admin = RawClient(broker.bootstrap_servers)
        # A Metadata request takes some 10-50 us of handler time: 0.0005 % of one
        # thread is a few dozen of them in the 2 s span.
        assert alter(admin, [("client-id", "busy")],
                     [("request_percentage", 0.0005, False)]) == [0]
        busy = RawClient(broker.bootstrap_servers)
        busy.conn.client_id = "busy"
        throttles = []
        while len(throttles) < 2000 and not any(throttles):
            throttles.append(busy.request(MetadataRequest(topics=None), 12).throttle_time_ms)
        assert max(throttles) > 0
        other = RawClient(broker.bootstrap_servers)
        assert all(other.request(MetadataRequest(topics=None), 12).throttle_time_ms == 0
                   for _ in range(30))
        for c in (admin, busy, other):
            c.close()


def test_connection_creation_rate_quota_per_ip() -> None:
    with Broker() as broker:
        admin = RawClient(broker.bootstrap_servers)
        assert alter(admin, [("ip", "127.0.0.1")], [("connection_creation_rate", 3, False)]) == [0]
        server = broker.app.server
        assert server is not None
        started = time.monotonic()
        clients = [RawClient(broker.bootstrap_servers, timeout_s=5) for _ in range(8)]
        took = time.monotonic() - started
        deadline = time.monotonic() + 10  # the broker has decided on all eight
        while (server.limits.open_total + sum(server.limits.rejected.values()) < 9
               and time.monotonic() < deadline):
            time.sleep(0.01)
        # Three tokens, plus what refilled (3 a second) while the test connected.
        admitted = 3 + int(took * 3) + 1
        rejected = server.limits.rejected["connection_creation_rate"]
        assert rejected >= 8 - admitted and rejected + server.limits.open_total == 9
        assert rejected == sum(server.limits.rejected.values())  # no other limit hit
        for c in [admin, *clients]:
            c.close()


def test_quota_protocol_errors_validate_only_and_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with Broker(data_dir=data) as broker:
        c = RawClient(broker.bootstrap_servers)
        assert alter(c, [("user", "alice"), ("client-id", None)],
                     [("producer_byte_rate", 5000, False), ("request_percentage", 25, False)]) \
            == [0]
        assert alter(c, [("client-id", "dry")], [("producer_byte_rate", 1, False)],
                     validate_only=True) == [0]
        assert alter(c, [("ip", "10.1.2.3"), ("user", "x")],
                     [("connection_creation_rate", 1, False)]) == [ErrorCode.INVALID_REQUEST]
        assert alter(c, [("client-id", "x")], [("no_such_quota", 1, False)]) \
            == [ErrorCode.INVALID_REQUEST]
        assert alter(c, [("client-id", "x")], [("producer_byte_rate", -1, False)]) \
            == [ErrorCode.INVALID_REQUEST]
        before = describe(c)
        assert before == {(("client-id", None), ("user", "alice")):
                          {"producer_byte_rate": 5000.0, "request_percentage": 25.0}}
        assert describe(c, [("user", 0, "alice")], strict=True) == {}  # client-id not named
        assert describe(c, [("user", 0, "alice")]) == before
        assert describe(c, [("client-id", 1, None)]) == before
        resp = c.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="user", match_type=0, match=None)]), 1)
        assert resp.error_code == ErrorCode.INVALID_REQUEST
        c.close()
    with Broker(data_dir=data) as broker:  # quotas are metadata records: they survive
        c = RawClient(broker.bootstrap_servers)
        assert describe(c) == before
        c.close()


def test_malformed_and_oversized_quota_requests() -> None:
    with Broker() as broker:
        bad = RawClient(broker.bootstrap_servers)
        # AlterClientQuotas v1 claiming 1,000,000 entries in a 20-byte body.
        body = struct.pack(">hhi", 49, 1, 7) + struct.pack(">h", 3) + b"bad" + b"\x00" \
            + b"\xc1\x84\x3d" + b"\x01"
        bad.send_raw(struct.pack(">i", len(body)) + body)
        assert bad.is_closed_by_peer()
        bad.close()
        c = RawClient(broker.bootstrap_servers)
        huge = "n" * 30_000
        assert alter(c, [("client-id", huge)], [("producer_byte_rate", 1000, False)]) == [0]
        many = AlterClientQuotasRequest(entries=[
            EntryData(entity=[EntityData(entity_type="client-id", entity_name=f"c{i}")],
                      ops=[OpData(key="consumer_byte_rate", value=1e6, remove=False)])
            for i in range(2000)])
        assert all(e.error_code == 0 for e in c.request(many, 1).entries)
        assert len(describe(c)) == 2001
        c.close()


def test_quotas_command_line_round_trip() -> None:
    with Broker() as broker:
        run = [sys.executable, "-m", "odradek", "quotas"]
        boot = ["--bootstrap-server", broker.bootstrap_servers]
        done = subprocess.run([*run, "alter", *boot, "--client-id", "app", "--add-config",
                               "producer_byte_rate=1048576,request_percentage=50"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        done = subprocess.run([*run, "describe", *boot, "--json"], capture_output=True,
                              text=True, timeout=30)
        rows = json.loads(done.stdout)
        assert {(r["key"], r["value"]) for r in rows} == {
            ("producer_byte_rate", 1048576.0), ("request_percentage", 50.0)}
        done = subprocess.run([*run, "alter", *boot, "--client-id", "app", "--add-config",
                               "producer_byte_rate=1.5"], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 1 and "whole number" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        done = subprocess.run([*run, "alter", *boot, "--client-id", "app", "--delete-config",
                               "producer_byte_rate,request_percentage"], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0
        done = subprocess.run([*run, "describe", *boot, "--json"], capture_output=True,
                              text=True, timeout=30)
        assert json.loads(done.stdout) == []


@pytest.mark.parametrize("args", [["alter", "--add-config", "producer_byte_rate=1"],
                                  ["alter", "--client-id", "a"],
                                  ["alter", "--client-id", "a", "--add-config", "x"]])
def test_quotas_command_line_errors(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "odradek", "quotas", *args,
                           "--bootstrap-server", "127.0.0.1:1"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr

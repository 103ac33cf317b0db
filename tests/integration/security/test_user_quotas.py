"""Client quotas by user, with real clients over real sockets.

On a PLAINTEXT listener every client is ``User:ANONYMOUS``, so a quota on the
user ``ANONYMOUS`` holds every client (confluent-kafka and kafka-python are
told so in ``throttle_time_ms`` and their produce rate is bounded), and a
quota on ``(ANONYMOUS, client-id)`` overrides it for that client. Quotas are
set and read with ``odradek quotas`` (kafka-configs.sh's flags: --user,
--user-defaults, --client, --client-defaults) and with DescribeClientQuotas's
match types; they survive a restart and are enforced after it. With a
users authenticated with SASL/SCRAM, a user's quota is one rate shared by
its client-ids while each user under the default has its own. (Neither
confluent-kafka 2.16.1 nor kafka-python 3.0.12 has an admin call for client
quotas, so the protocol is driven by the CLI and a raw client.)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from kafka import KafkaProducer

from odradek.client.security import ClientSecurity
from odradek.testing.broker import Broker
from tests.integration.test_quotas import alter, describe
from tests.support.rawclient import RawClient

# Two 1 s windows: a new client may burst one second's worth of its quota.
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
QUOTA = 50_000  # bytes/s
RECORD = b"v" * 10_000
COUNT = 15  # 150 KB: at 50 KB/s with a 1 s burst, at least about 2 s


class Librdkafka:
    """A confluent-kafka producer remembering the largest throttle librdkafka saw."""

    def __init__(self, bootstrap: str, client_id: str,
                 config: dict[str, str] | None = None) -> None:
        self.max_throttle = 0
        self.producer = Producer({
            **(config or {}),
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
            "linger.ms": 0, "batch.num.messages": 1, "statistics.interval.ms": 100,
            "stats_cb": self._stats,
        })

    def _stats(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            self.max_throttle = max(self.max_throttle, broker.get("throttle", {}).get("max", 0))

    def send(self, count: int) -> float:
        """Produce ``count`` records, wait for every acknowledgement; the seconds taken."""
        errors: list[Any] = []
        start = time.monotonic()
        for _ in range(count):
            self.producer.produce("q", RECORD, on_delivery=lambda e, _m: errors.append(e))
            self.producer.poll(0)
        assert self.producer.flush(60) == 0
        took = time.monotonic() - start
        assert errors == [None] * count
        return took

    def settle_stats(self) -> None:
        """Serve the statistics callbacks that cover every answer received so far."""
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            self.producer.poll(0.05)


def _kafka_python_throttle(producer: KafkaProducer) -> float:
    found = [v for group in producer.metrics().values() for k, v in group.items()
             if k == "throttle-time-max" and isinstance(v, (int, float))]
    return max(found, default=0.0)


def _kafka_python_send(producer: KafkaProducer, count: int) -> float:
    start = time.monotonic()
    futures = [producer.send("q", RECORD) for _ in range(count)]
    for f in futures:
        f.get(timeout=60)
    return time.monotonic() - start


def test_a_user_quota_on_anonymous_throttles_and_a_client_id_quota_overrides_it() -> None:
    """confluent-kafka: the user quota bounds a producer and is reported as
    throttle time; (ANONYMOUS, bulk) lets the client "bulk" through unthrottled."""
    with Broker(**WINDOWS) as broker:
        broker.create_topic("q", partitions=1)
        admin = RawClient(broker.bootstrap_servers)
        assert alter(admin, [("user", "ANONYMOUS")],
                     [("producer_byte_rate", QUOTA, False)]) == [0]
        assert alter(admin, [("user", "ANONYMOUS"), ("client-id", "bulk")],
                     [("producer_byte_rate", 10**9, False)]) == [0]
        limited = Librdkafka(broker.bootstrap_servers, "app")
        took = limited.send(COUNT)
        limited.settle_stats()
        assert limited.max_throttle > 0
        # 150 KB at 50 KB/s, one second of it allowed as a burst.
        assert took >= 1.5, f"{COUNT * len(RECORD)} bytes in {took:.2f} s"
        bulk = Librdkafka(broker.bootstrap_servers, "bulk")
        bulk.send(COUNT)
        bulk.settle_stats()
        assert bulk.max_throttle == 0
        server = broker.app.server
        assert server is not None and server.stats["throttled"] > 0
        admin.close()
        del limited, bulk  # librdkafka's handles go before their broker


def test_kafka_python_is_held_by_the_user_quota_and_freed_by_its_own() -> None:
    """kafka-python: a user-default quota (every user, ANONYMOUS included) is
    reported in its throttle-time metric; a (user, client-id) quota for
    ANONYMOUS and its client id overrides the default."""
    with Broker(**WINDOWS) as broker:
        broker.create_topic("q", partitions=1)
        admin = RawClient(broker.bootstrap_servers)
        assert alter(admin, [("user", None)], [("producer_byte_rate", QUOTA, False)]) == [0]
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                 client_id="kp-limited", acks=1, linger_ms=0, batch_size=1)
        took = _kafka_python_send(producer, COUNT)
        assert _kafka_python_throttle(producer) > 0
        assert took >= 1.5, f"{COUNT * len(RECORD)} bytes in {took:.2f} s"
        producer.close(timeout=10)
        assert alter(admin, [("user", "ANONYMOUS"), ("client-id", "kp-free")],
                     [("producer_byte_rate", 10**9, False)]) == [0]
        free = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             client_id="kp-free", acks=1, linger_ms=0, batch_size=1)
        _kafka_python_send(free, COUNT)
        assert _kafka_python_throttle(free) == 0
        free.close(timeout=10)
        admin.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "quotas", *args],
                          capture_output=True, text=True, timeout=60)


def test_user_quotas_by_command_line_match_types_and_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with Broker(data_dir=data, **WINDOWS) as broker:
        boot = ["--bootstrap-server", broker.bootstrap_servers]
        for entity, config in [
            (["--user", "ANONYMOUS"], f"producer_byte_rate={QUOTA}"),
            (["--user", "alice", "--client", "bulk"], "producer_byte_rate=1e9"),
            (["--user-defaults", "--client-defaults"], "consumer_byte_rate=2e6"),
            (["--user-default"], "request_percentage=80"),
        ]:
            done = _cli("alter", *boot, *entity, "--add-config", config)
            assert done.returncode == 0, done.stderr
        done = _cli("describe", *boot, "--user", "alice", "--client-id", "bulk", "--json")
        assert json.loads(done.stdout) == [{
            "entity": [{"type": "client-id", "name": "bulk"}, {"type": "user", "name": "alice"}],
            "key": "producer_byte_rate", "value": 1e9}]
        done = _cli("describe", *boot, "--user-defaults", "--json")  # strict: no client-id
        assert [r["key"] for r in json.loads(done.stdout)] == ["request_percentage"]
        c = RawClient(broker.bootstrap_servers)
        everything = describe(c)
        assert everything == {
            (("user", "ANONYMOUS"),): {"producer_byte_rate": QUOTA},
            (("client-id", "bulk"), ("user", "alice")): {"producer_byte_rate": 1e9},
            (("client-id", None), ("user", None)): {"consumer_byte_rate": 2e6},
            (("user", None),): {"request_percentage": 80.0},
        }
        # Match types: 0 exact name, 1 the default, 2 any specified name.
        assert set(describe(c, [("user", 0, "ANONYMOUS")])) == {(("user", "ANONYMOUS"),)}
        assert set(describe(c, [("user", 1, None)])) == {
            (("client-id", None), ("user", None)), (("user", None),)}
        assert set(describe(c, [("user", 2, None)])) == {
            (("user", "ANONYMOUS"),), (("client-id", "bulk"), ("user", "alice"))}
        assert set(describe(c, [("user", 2, None), ("client-id", 2, None)])) == {
            (("client-id", "bulk"), ("user", "alice"))}
        c.close()
    with Broker(data_dir=data, **WINDOWS) as broker:  # ClientQuotaRecords: replayed
        c = RawClient(broker.bootstrap_servers)
        assert describe(c) == everything
        c.close()
        broker.create_topic("q", partitions=1)
        limited = Librdkafka(broker.bootstrap_servers, "after-restart")
        took = limited.send(COUNT)
        limited.settle_stats()
        assert limited.max_throttle > 0 and took >= 1.5
        del limited  # librdkafka's handle goes before its broker


def test_a_users_quota_is_shared_by_its_clients_and_a_default_users_is_not() -> None:
    """100 KB/s for alice and for every other user (the default), 2 windows of
    1 s: 80 KB is within one client's first-second allowance. alice-1 then
    alice-2 send 80 KB each: alice-2 is throttled, the two share alice's rate.
    bob-1 then carol-1 send 80 KB each: neither is, each user has its own. The
    users authenticate with SASL/SCRAM; the quotas are set as the admin."""
    users = {name: f"{name}-pw" for name in ("alice", "bob", "carol")}
    with Broker(sasl=users, **WINDOWS) as broker:
        broker.create_topic("q", partitions=1)
        admin = broker.client_config()
        security = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                  sasl_username="admin", sasl_password=admin["sasl.password"])
        for entity in ([("user", "alice")], [("user", None)]):
            assert _alter_as(broker.bootstrap_servers, security, entity, 100_000) == [0]
        throttles: dict[str, int] = {}
        for pair in (("alice-1", "alice-2"), ("bob-1", "carol-1")):
            producers = [Librdkafka(broker.bootstrap_servers, client_id, broker.client_config(
                user=client_id.split("-")[0])) for client_id in pair]
            for producer in producers:  # one after the other, within one window
                producer.send(8)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:  # the statistics of every answer
                for producer in producers:
                    producer.producer.poll(0.02)
            throttles.update((c, p.max_throttle) for c, p in zip(pair, producers, strict=True))
            del producers
        assert throttles["alice-1"] == 0 and throttles["alice-2"] > 0, throttles
        assert throttles["bob-1"] == 0 and throttles["carol-1"] == 0, throttles


def _alter_as(bootstrap: str, security: ClientSecurity, entity: list[tuple[str, str | None]],
              rate: int) -> list[int]:
    """AlterClientQuotas (producer_byte_rate) over an authenticated connection."""
    from odradek.client.client import KafkaClient
    from odradek.wire.messages.alter_client_quotas_request import (
        AlterClientQuotasRequest,
        EntityData,
        EntryData,
        OpData,
    )

    async def run() -> list[int]:
        client = await KafkaClient.connect(bootstrap, security=security)
        try:
            resp = await client.request(AlterClientQuotasRequest(entries=[EntryData(
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[OpData(key="producer_byte_rate", value=rate, remove=False)])]), 1)
        finally:
            await client.close()
        return [e.error_code for e in resp.entries]

    return asyncio.run(run())

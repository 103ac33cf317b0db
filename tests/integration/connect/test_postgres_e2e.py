"""The PostgreSQL connectors run by a real Connect worker against a real broker
and a real PostgreSQL: the sink upserts 100k records (JSON, schemaless) to the
topic's last value per key; the CDC source and the polling source, in a worker
process killed with SIGKILL and started again, lose no change (at-least-once)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from confluent_kafka import Consumer, Producer

from odradek.testing.broker import Broker
from tests.integration.connect.conftest import Running
from tests.integration.connect.support import (
    WorkerProcess,
    call,
    running,
    wait_for,
    worker_props,
    write_properties,
)

JSON = "org.apache.kafka.connect.json.JsonConverter"


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    except psycopg2.errors.UndefinedTable:
        return []
    finally:
        conn.close()


@pytest.mark.slow
def test_sink_upserts_100k_records_to_the_last_value_per_key(
        connect: Running, postgres_url: str) -> None:
    connect.broker.create_topic("items", partitions=3)
    producer = Producer({"bootstrap.servers": connect.broker.bootstrap_servers,
                         "linger.ms": 20})
    rng = random.Random(37)
    expected: dict[int, tuple[str, int] | None] = {}
    for i in range(100_000):
        k = rng.randrange(5000)
        key = json.dumps({"id": k}).encode()
        if rng.random() < 0.03:
            expected[k] = None
            value = None
        else:
            expected[k] = (f"v{i}", i)
            value = json.dumps({"id": k, "name": f"v{i}", "n": i}).encode()
        while True:
            try:
                producer.produce("items", key=key, value=value)  # one partition per key
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    want = sorted((k, v[0], v[1]) for k, v in expected.items() if v is not None)
    config = {"connector.class": "PostgresSink", "connection.url": postgres_url,
              "topics": "items", "insert.mode": "upsert", "pk.mode": "record_key",
              "delete.enabled": "true", "auto.create": "true",
              "key.converter": JSON, "key.converter.schemas.enable": "false",
              "value.converter": JSON, "value.converter.schemas.enable": "false"}
    status, body = call("POST", connect.url + "/connectors", {"name": "pg", "config": config})
    assert status == 201, body
    wait_for("pg running", lambda: running(connect.url, "pg"))
    wait_for("the table at the topic's last value per key", lambda: _rows(
        postgres_url, "SELECT id, name, n FROM items ORDER BY id") == want, timeout=240)


def _consume(bootstrap: str, topic: str, until: Any, timeout: float = 60,
             missing: Any = None) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while not until(got):
            assert time.monotonic() < deadline, (
                f"{len(got)} events; missing {missing(got) if missing else '?'}")
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is None and m.value() is not None:
                    got.append(json.loads(m.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_cdc_loses_nothing_across_kill_9(tmp_path: Path, postgres_url: str) -> None:
    db = psycopg2.connect(postgres_url)
    db.autocommit = True
    cur = db.cursor()
    cur.execute("CREATE TABLE items (id integer PRIMARY KEY, n integer);"
                "ALTER TABLE items REPLICA IDENTITY FULL;"
                "INSERT INTO items SELECT i, 0 FROM generate_series(1, 100) i")
    topic = "shop.public.items"
    with Broker() as broker:
        broker.create_topic(topic, partitions=1)
        worker = write_properties(tmp_path / "worker.properties", worker_props(
            broker.bootstrap_servers, tmp_path, **{
                "key.converter": JSON, "value.converter": JSON,
                "key.converter.schemas.enable": "false",
                "value.converter.schemas.enable": "false"}))
        cdc = write_properties(tmp_path / "cdc.properties", {
            "name": "cdc", "connector.class": "PostgresCdcSource",
            "connection.url": postgres_url, "topic.prefix": "shop",
            "slot.name": "slot_" + postgres_url.rsplit("/", 1)[1],
            "table.include.list": "public.items", "poll.interval.ms": "100"})
        offsets_file = tmp_path / "connect.offsets"
        proc = WorkerProcess(worker, [cdc])
        try:
            _consume(broker.bootstrap_servers, topic, lambda got: len(got) >= 100)  # snapshot
            for round_ in range(1, 4):  # updates in commit order: n = 1, 2, 3 per row
                cur.execute(f"UPDATE items SET n = {round_}")
            wait_for("a committed offset of a change", lambda: offsets_file.exists()
                     and "txId" in offsets_file.read_text(), timeout=60)
        finally:
            proc.kill()
        for round_ in range(4, 6):  # while the worker is down
            cur.execute(f"UPDATE items SET n = {round_}")
        proc = WorkerProcess(worker, [cdc])
        try:
            cur.execute("DELETE FROM items WHERE id <= 10")
            events = _consume(broker.bootstrap_servers, topic, lambda got: sum(
                1 for e in got if e["op"] == "d") >= 10, timeout=90)
        finally:
            assert proc.terminate() == 0
    db.close()
    # Every row's history, in commit order, with nothing missing (a replay after
    # the kill may repeat a suffix of it: at-least-once).
    history: dict[int, list[Any]] = {}
    for e in events:
        row = e["after"] or e["before"]
        history.setdefault(row["id"], []).append(
            "d" if e["op"] == "d" else (e["op"], e["after"]["n"]))
    for i in range(1, 101):
        seen = history[i]
        want = [("r", 0), ("u", 1), ("u", 2), ("u", 3), ("u", 4), ("u", 5)] + (
            ["d"] if i <= 10 else [])
        assert _without_replays(seen) == want, (i, seen)


@pytest.mark.slow
def test_polling_source_loses_nothing_across_kill_9(tmp_path: Path, postgres_url: str) -> None:
    db = psycopg2.connect(postgres_url)
    db.autocommit = True
    cur = db.cursor()
    cur.execute("CREATE TABLE items (id serial PRIMARY KEY, n integer,"
                " updated timestamp NOT NULL DEFAULT clock_timestamp());"
                "INSERT INTO items (n) SELECT 0 FROM generate_series(1, 2000)")
    with Broker() as broker:
        broker.create_topic("pg-items", partitions=1)
        worker = write_properties(tmp_path / "worker.properties", worker_props(
            broker.bootstrap_servers, tmp_path, **{
                "value.converter": JSON, "value.converter.schemas.enable": "false"}))
        src = write_properties(tmp_path / "src.properties", {
            "name": "src", "connector.class": "PostgresSource",
            "connection.url": postgres_url, "mode": "timestamp+incrementing",
            "incrementing.column.name": "id", "timestamp.column.name": "updated",
            "table.whitelist": "items", "topic.prefix": "pg-", "poll.interval.ms": "50",
            "batch.max.rows": "100"})
        offsets_file = tmp_path / "connect.offsets"
        proc = WorkerProcess(worker, [src])
        try:
            wait_for("a committed offset", lambda: offsets_file.exists()
                     and "incrementing" in offsets_file.read_text(), timeout=60)
        finally:
            proc.kill()
        # While the worker is down: updates (a new timestamp each) and inserts.
        cur.execute("UPDATE items SET n = 1, updated = clock_timestamp() WHERE id % 10 = 0")
        cur.execute("INSERT INTO items (n) SELECT 2 FROM generate_series(1, 100)")
        proc = WorkerProcess(worker, [src])
        try:
            # Each row's current version; a row updated before the source read
            # it (while down) may show only its new version, as polling can.
            want = {(i, 0) for i in range(1, 2001) if i % 10} \
                | {(i, 1) for i in range(10, 2001, 10)} | {(i, 2) for i in range(2001, 2101)}
            events = _consume(broker.bootstrap_servers, "pg-items", lambda got: {
                (e["id"], e["n"]) for e in got} >= want, timeout=90,
                missing=lambda got: sorted(want - {(e["id"], e["n"]) for e in got})[:20])
        finally:
            assert proc.terminate() == 0
    db.close()
    # Every version of every row (at-least-once); each row's versions in order.
    assert {(e["id"], e["n"]) for e in events} - want <= {(i, 0) for i in range(10, 2001, 10)}
    order: dict[int, list[int]] = {}
    for e in events:
        order.setdefault(e["id"], []).append(e["n"])
    assert all(_without_replays(ns) == sorted(set(ns)) for ns in order.values())


def _without_replays(seen: list[Any]) -> list[Any]:
    """``seen`` with a replayed run (events seen again after a restart) removed:
    keep each event the first time, in order."""
    out: list[Any] = []
    for x in seen:
        if x not in out:
            out.append(x)
    return out

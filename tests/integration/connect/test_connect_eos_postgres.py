"""Exactly-once with PostgreSQL, in worker processes killed with SIGKILL: the
CDC source and the polling source (exactly-once source, KIP-618) write each
change once, in commit order; the sink (offsets in the database, with the
rows) inserts each record once though the consumer's offsets were never
committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from confluent_kafka import Producer

from odradek.testing.broker import Broker
from tests.integration.connect.support import (
    WorkerProcess,
    wait_for,
    worker_props,
    write_properties,
)
from tests.integration.connect.test_connect_eos import EOS, Reader

JSON = "org.apache.kafka.connect.json.JsonConverter"
SCHEMALESS = {"key.converter": JSON, "value.converter": JSON,
              "key.converter.schemas.enable": "false",
              "value.converter.schemas.enable": "false"}


def _events(reader: Reader) -> list[Any]:
    return [json.loads(v) for _, v in reader.read() if v]


@pytest.mark.slow
def test_cdc_exactly_once_across_kill_9(tmp_path: Path, postgres_url: str) -> None:
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
            broker.bootstrap_servers, tmp_path, **EOS, **SCHEMALESS))
        cdc = write_properties(tmp_path / "cdc.properties", {
            "name": "cdc", "connector.class": "PostgresCdcSource",
            "connection.url": postgres_url, "topic.prefix": "shop",
            "slot.name": "slot_" + postgres_url.rsplit("/", 1)[1],
            "table.include.list": "public.items", "poll.interval.ms": "100",
            "exactly.once.support": "required"})
        reader = Reader(broker.bootstrap_servers, topic)
        try:
            proc = WorkerProcess(worker, [cdc])
            try:
                wait_for("the snapshot", lambda: len(_events(reader)) >= 100, timeout=60)
                for round_ in range(1, 4):  # updates in commit order: n = 1, 2, 3 per row
                    cur.execute(f"UPDATE items SET n = {round_}")
                wait_for("some updates", lambda: len(_events(reader)) > 150, timeout=60)
            finally:
                proc.kill()  # most likely mid-stream: 300 updates in 3 transactions
            for round_ in range(4, 6):  # while the worker is down
                cur.execute(f"UPDATE items SET n = {round_}")
            proc = WorkerProcess(worker, [cdc])
            try:
                cur.execute("DELETE FROM items WHERE id <= 10")
                wait_for("the deletes", lambda: sum(
                    1 for e in _events(reader) if e["op"] == "d") >= 10, timeout=90)
            finally:
                assert proc.terminate() == 0
            events = _events(reader)
        finally:
            reader.close()
    db.close()
    history: dict[int, list[Any]] = {}
    for e in events:
        row = e["after"] or e["before"]
        history.setdefault(row["id"], []).append(
            "d" if e["op"] == "d" else (e["op"], e["after"]["n"]))
    for i in range(1, 101):  # each row's history exactly, nothing repeated
        want = [("r", 0), ("u", 1), ("u", 2), ("u", 3), ("u", 4), ("u", 5)] + (
            ["d"] if i <= 10 else [])
        assert history[i] == want, (i, history[i])
    assert len(events) == 610


@pytest.mark.slow
def test_polling_source_exactly_once_across_kill_9(tmp_path: Path, postgres_url: str) -> None:
    db = psycopg2.connect(postgres_url)
    db.autocommit = True
    cur = db.cursor()
    cur.execute("CREATE TABLE items (id serial PRIMARY KEY, n integer,"
                " updated timestamp NOT NULL DEFAULT clock_timestamp());"
                "INSERT INTO items (n) SELECT 0 FROM generate_series(1, 3000)")
    with Broker() as broker:
        broker.create_topic("pg-items", partitions=1)
        worker = write_properties(tmp_path / "worker.properties", worker_props(
            broker.bootstrap_servers, tmp_path, **EOS,
            **{"value.converter": JSON, "value.converter.schemas.enable": "false"}))
        src = write_properties(tmp_path / "src.properties", {
            "name": "src", "connector.class": "PostgresSource",
            "connection.url": postgres_url, "mode": "timestamp+incrementing",
            "incrementing.column.name": "id", "timestamp.column.name": "updated",
            "table.whitelist": "items", "topic.prefix": "pg-", "poll.interval.ms": "50",
            "batch.max.rows": "50", "exactly.once.support": "required"})
        reader = Reader(broker.bootstrap_servers, "pg-items")
        try:
            proc = WorkerProcess(worker, [src])
            try:
                wait_for("some rows", lambda: len(_events(reader)) >= 500, timeout=60)
            finally:
                proc.kill()
            seen_at_kill = len(_events(reader))
            # While the worker is down: updates (a new timestamp each) and inserts.
            cur.execute("UPDATE items SET n = 1, updated = clock_timestamp() WHERE id % 10 = 0")
            cur.execute("INSERT INTO items (n) SELECT 2 FROM generate_series(1, 100)")
            want = {(i, 0) for i in range(1, 3001) if i % 10} \
                | {(i, 1) for i in range(10, 3001, 10)} | {(i, 2) for i in range(3001, 3101)}
            proc = WorkerProcess(worker, [src])
            try:
                wait_for("every row's current version", lambda: {
                    (e["id"], e["n"]) for e in _events(reader)} >= want, timeout=90)
            finally:
                assert proc.terminate() == 0
            events = _events(reader)
        finally:
            reader.close()
    db.close()
    assert 0 < seen_at_kill < 3000  # the kill came mid-stream
    pairs = [(e["id"], e["n"]) for e in events]
    assert len(pairs) == len(set(pairs)), "a row version was written twice"
    # rows read before the kill may also show their first version (n=0)
    assert set(pairs) - want <= {(i, 0) for i in range(10, 3001, 10)}
    order: dict[int, list[int]] = {}
    for i, n in pairs:
        order.setdefault(i, []).append(n)
    assert all(ns == sorted(ns) for ns in order.values())


@pytest.mark.slow
def test_sink_inserts_each_record_once_across_kill_9(tmp_path: Path,
                                                      postgres_url: str) -> None:
    def count(sql: str) -> int:
        conn = psycopg2.connect(postgres_url)
        try:
            with conn.cursor() as c:
                c.execute(sql)
                return int(c.fetchone()[0])
        except psycopg2.errors.UndefinedTable:
            return 0
        finally:
            conn.close()

    with Broker() as broker:
        broker.create_topic("events", partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        total = 0

        def produce(n: int) -> None:
            nonlocal total
            for i in range(total, total + n):
                producer.produce("events", key=json.dumps(i).encode(),
                                 value=json.dumps({"id": i, "v": f"e{i}"}).encode())
                if i % 1000 == 0:
                    producer.poll(0)
            total += n
            assert producer.flush(30) == 0

        produce(20000)
        # consumer offsets are never committed before the kills (a long flush
        # interval); the killed task's consumer leaves the group after 6 s, not
        # librdkafka's default 45 s, so the restarted one is assigned sooner
        worker = write_properties(tmp_path / "worker.properties", {
            **worker_props(broker.bootstrap_servers, tmp_path, **SCHEMALESS),
            "offset.flush.interval.ms": "600000", "consumer.session.timeout.ms": "6000"})
        sink = write_properties(tmp_path / "sink.properties", {
            "name": "pg", "connector.class": "PostgresSink", "connection.url": postgres_url,
            "topics": "events", "insert.mode": "insert", "pk.mode": "none",
            "auto.create": "true", "exactly.once.enabled": "true", "batch.size": "200"})
        for _ in range(2):
            proc = WorkerProcess(worker, [sink])
            try:
                at = count("SELECT count(*) FROM events")
                wait_for("more rows", lambda at=at: count(
                    "SELECT count(*) FROM events") > at + 2000, timeout=60)
            finally:
                proc.kill()
            produce(5000)
        proc = WorkerProcess(worker, [sink])
        try:
            wait_for("every record in the table", lambda: count(
                "SELECT count(*) FROM events") >= total, timeout=120)
        finally:
            assert proc.terminate() == 0
    assert count("SELECT count(*) FROM events") == total
    assert count("SELECT count(DISTINCT id) FROM events") == total

"""The CDC source and the sink composed over a real Odradek broker, with a
real producer and consumer standing in for the worker (the runtime is built
separately): the source's records are acknowledged from the producer's
delivery reports, which alone move the replication slot; the sink turns the
events (their ``after`` image, tombstones for deletes) into upserts and
deletes, and the copy equals the source table."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg2
from confluent_kafka import Consumer, KafkaError, Message, Producer

from odradek.connect.api import TopicPartition
from odradek.connect.connectors.postgres import pgoutput
from odradek.connect.connectors.postgres.cdc import PostgresCdcSourceTask
from odradek.connect.connectors.postgres.sink import PostgresSinkTask
from odradek.connect.data import SinkRecord, SourceRecord
from odradek.testing.broker import Broker

from .pgsupport import FakeSinkContext, FakeSourceContext, MemoryOffsets

TOPIC = "shop.public.items"


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_cdc_to_topic_to_sink(postgres_url: str, broker: Broker) -> None:
    src = psycopg2.connect(postgres_url)
    src.autocommit = True
    cur = src.cursor()
    cur.execute("CREATE DATABASE copy")
    copy_url = postgres_url.rsplit("/", 1)[0] + "/copy"
    cur.execute("CREATE TABLE items (id integer PRIMARY KEY, name text, qty integer);"
                "ALTER TABLE items REPLICA IDENTITY FULL;"
                "INSERT INTO items SELECT i, 'n' || i, i FROM generate_series(1, 50) i")
    broker.create_topic(TOPIC, partitions=3)

    offsets = MemoryOffsets()
    source = PostgresCdcSourceTask()
    source.initialize(FakeSourceContext(offsets))
    source.start({"connection.url": postgres_url, "topic.prefix": "shop", "slot.name": "pipe",
                  "table.include.list": "public.items", "poll.interval.ms": "50"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})

    def send(r: SourceRecord) -> None:
        value = None
        if r.value is not None:
            value = json.dumps(r.value["after"]).encode() if r.value["after"] else b"null"

        def acked(err: KafkaError | None, msg: Message, r: SourceRecord = r) -> None:
            assert err is None, err
            source.commit_record(r, None)
            offsets.commit(r.source_partition, r.source_offset)

        producer.produce(r.topic, key=json.dumps(r.key).encode(), value=value,
                         on_delivery=acked)

    for statement in ("UPDATE items SET qty = qty + 100 WHERE id % 3 = 0",
                      "DELETE FROM items WHERE id % 5 = 0",
                      "INSERT INTO items SELECT i, 'm' || i, i FROM generate_series(51, 70) i"):
        cur.execute(statement)
    # The last transaction ends after this LSN: once the slot is past it, every
    # change was delivered.
    end = pgoutput.lsn_int(_one(cur, "SELECT pg_current_wal_insert_lsn()::text"))
    cur.execute("UPDATE items SET name = 'again' WHERE id > 60")
    expected = _rows(postgres_url, "SELECT id, name, qty FROM items ORDER BY id")

    # Poll and produce until the slot has moved past the last change: it moves
    # only on delivery reports.
    sent = 0
    deadline = time.monotonic() + 30
    try:
        while _slot(cur) <= end:
            assert time.monotonic() < deadline, "the slot did not reach the last change"
            for r in source.poll() or []:
                send(r)
                sent += 1
            producer.flush(10)
    finally:
        source.stop()

    sink = PostgresSinkTask()
    parts = {TopicPartition(TOPIC, p) for p in range(3)}
    sink.initialize(FakeSinkContext(parts))
    sink.start({"name": "copy", "connection.url": copy_url, "topics": TOPIC,
                "table.name.format": "items", "insert.mode": "upsert",
                "pk.mode": "record_key", "delete.enabled": "true", "auto.create": "true",
                "exactly.once.enabled": "true"})
    sink.open(sorted(parts, key=lambda tp: tp.partition))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "copy",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 30
    while got < sent:
        assert time.monotonic() < deadline, f"consumed {got} of {sent}"
        batch = []
        for m in consumer.consume(500, timeout=0.5):
            assert m.error() is None, m.error()
            value = m.value()
            if value == b"null":  # a delete event: its tombstone follows
                got += 1
                continue
            batch.append(SinkRecord(m.topic(), m.partition(), None, json.loads(m.key()), None,
                                    None if value is None else json.loads(value),
                                    kafka_offset=m.offset()))
            got += 1
        sink.put(batch)
    consumer.close()
    sink.stop()
    # snapshot 50, 16 updates, 10 deletes and their tombstones, 20 inserts, 10 updates
    assert sent == 50 + 16 + 10 * 2 + 20 + 10
    assert _rows(copy_url, "SELECT id, name, qty FROM items ORDER BY id") == expected


def _one(cur: Any, sql: str) -> Any:
    cur.execute(sql)
    return cur.fetchone()[0]


def _slot(cur: Any) -> int:
    text = _one(cur, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots"
                     " WHERE slot_name = 'pipe'")
    return pgoutput.lsn_int(text)

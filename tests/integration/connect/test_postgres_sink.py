"""The PostgreSQL sink task against a real PostgreSQL server: upserts, deletes
from tombstones, auto-create/evolve, and offsets stored with the rows."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import psycopg2
import pytest

from odradek.connect import data
from odradek.connect.api import TopicPartition
from odradek.connect.connectors.postgres.sink import PostgresSinkConnector, PostgresSinkTask
from odradek.connect.data import Schema, SinkRecord
from odradek.connect.plugins import load

from .pgsupport import FakeSinkContext

KEY = data.struct(("id", Schema(data.INT64)))
VALUE = data.struct(("id", Schema(data.INT64)), ("name", data.OPTIONAL_STRING),
                    ("n", Schema(data.INT32, optional=True)))


def _task(url: str, tps: set[TopicPartition], **props: str) -> tuple[PostgresSinkTask,
                                                                     FakeSinkContext]:
    task = PostgresSinkTask()
    ctx = FakeSinkContext(tps)
    task.initialize(ctx)
    task.start({"name": "pg-sink", "connection.url": url, "topics": "items",
                "auto.create": "true", "auto.evolve": "true", **props})
    task.open(sorted(tps, key=lambda tp: tp.partition))
    return task, ctx


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_sink_resolves_by_alias() -> None:
    assert load("PostgresSink") is PostgresSinkConnector
    assert load("PostgresSinkConnector") is PostgresSinkConnector


@pytest.mark.slow
def test_upserts_100k_records_to_the_last_value_per_key(postgres_url: str) -> None:
    rng = random.Random(37)
    tps = {TopicPartition("items", p) for p in range(3)}
    task, _ = _task(postgres_url, tps, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                    "delete.enabled": "true", "batch.size": "2000"})
    expected: dict[int, tuple[str, int] | None] = {}
    offsets = {p: 0 for p in range(3)}
    batch: list[SinkRecord] = []
    for i in range(100_000):
        k = rng.randrange(5000)
        p = k % 3
        if rng.random() < 0.03:
            value, schema = None, None
            expected[k] = None
        else:
            value = {"id": k, "name": f"v{i}", "n": i}
            schema = VALUE
            expected[k] = (f"v{i}", i)
        batch.append(SinkRecord("items", p, KEY, {"id": k}, schema, value,
                                kafka_offset=offsets[p]))
        offsets[p] += 1
        if len(batch) == 5000:
            task.put(batch)
            batch = []
    task.put(batch)
    task.stop()
    want = sorted((k, v[0], v[1]) for k, v in expected.items() if v is not None)
    assert _rows(postgres_url, "SELECT id, name, n FROM items ORDER BY id") == want
    assert any(v is None for v in expected.values())


def test_auto_create_types_and_evolve(postgres_url: str) -> None:
    task, _ = _task(postgres_url, {TopicPartition("items", 0)},
                    **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"})
    schema = data.struct(
        ("id", Schema(data.INT32)), ("ok", Schema(data.BOOLEAN)),
        ("price", Schema(data.BYTES, name=data.DECIMAL, parameters={"scale": "2"})),
        ("day", Schema(data.INT32, name=data.DATE)),
        ("at", Schema(data.INT64, name=data.TIMESTAMP)), ("raw", data.OPTIONAL_BYTES))
    at = dt.datetime(2026, 11, 28, 12, 30, tzinfo=dt.UTC)
    task.put([SinkRecord("items", 0, None, None, schema, {
        "id": 1, "ok": True, "price": decimal.Decimal("9.99"), "day": dt.date(2026, 1, 2),
        "at": at, "raw": b"\x00\x01"}, kafka_offset=0)])
    # A schemaless record with one more field: the table gains a column.
    task.put([SinkRecord("items", 0, None, None, None, {"id": 1, "ok": False, "extra": "x"},
                         kafka_offset=1)])
    task.stop()
    types = dict(_rows(postgres_url, "SELECT column_name, data_type FROM information_schema.columns"
                               " WHERE table_name = 'items'"))
    assert types == {"id": "integer", "ok": "boolean", "price": "numeric", "day": "date",
                     "at": "timestamp without time zone", "raw": "bytea", "extra": "text"}
    assert _rows(postgres_url, "SELECT id, ok, price, day, at, encode(raw, 'hex'), extra"
                         " FROM items") == [
        (1, False, decimal.Decimal("9.99"), dt.date(2026, 1, 2), at.replace(tzinfo=None),
         "0001", "x")]


def test_exactly_once_offsets_stored_with_the_rows(postgres_url: str) -> None:
    tp = TopicPartition("items", 0)
    props = {"insert.mode": "insert", "exactly.once.enabled": "true"}
    task, ctx = _task(postgres_url, {tp}, **props)
    assert ctx.resets == {}
    task.put([SinkRecord("items", 0, None, None, VALUE, {"id": i, "name": "a", "n": i},
                         kafka_offset=i) for i in range(10)])
    assert task.pre_commit({tp: 10}) == {tp: 10}
    task.stop()
    # A new task resumes at the stored offset; records the consumer redelivers
    # below it are not written twice.
    task, ctx = _task(postgres_url, {tp}, **props)
    assert ctx.resets == {tp: 10}
    task.put([SinkRecord("items", 0, None, None, VALUE, {"id": i, "name": "b", "n": i},
                         kafka_offset=i) for i in range(5, 15)])
    assert task.pre_commit({tp: 15}) == {tp: 15}
    task.stop()
    assert _rows(postgres_url, "SELECT id, name FROM items ORDER BY id") == (
        [(i, "a") for i in range(10)] + [(i, "b") for i in range(10, 15)])
    assert _rows(postgres_url, "SELECT connector, topic, kafka_partition, next_offset"
                         " FROM __odradek_connect_offsets") == [("pg-sink", "items", 0, 15)]


def test_a_failed_put_writes_nothing(postgres_url: str) -> None:
    tp = TopicPartition("items", 0)
    task, _ = _task(postgres_url, {tp}, **{"exactly.once.enabled": "true", "auto.evolve": "false"})
    task.put([SinkRecord("items", 0, None, None, VALUE, {"id": 1, "name": "a", "n": 1},
                         kafka_offset=0)])
    with pytest.raises(ValueError, match=r"auto\.evolve"):
        task.put([SinkRecord("items", 0, None, None, VALUE, {"id": 2, "name": "b", "n": 2},
                             kafka_offset=1),
                  SinkRecord("items", 0, None, None, None, {"id": 3, "bad": 1},
                             kafka_offset=2)])
    task.stop()
    assert _rows(postgres_url, "SELECT id FROM items") == [(1,)]
    assert _rows(postgres_url, "SELECT next_offset FROM __odradek_connect_offsets") == [(1,)]

"""The polling PostgreSQL source task against a real server: each mode captures
what it promises, in order, and a task resumes from a committed offset."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from odradek.connect.connectors.postgres.polling import (
    PostgresSourceConnector,
    PostgresSourceTask,
    ts_from_offset,
    ts_offset,
)
from odradek.connect.data import SourceRecord
from odradek.connect.plugins import load

from .pgsupport import FakeSourceContext, MemoryOffsets

BASE = dt.datetime(2026, 1, 1, 12, 0, 0)


@pytest.fixture
def db(postgres_url: str) -> Iterator[Any]:
    conn = psycopg2.connect(postgres_url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id serial PRIMARY KEY, name text,"
                    " price numeric(8,2), updated timestamp NOT NULL)")
    yield conn
    conn.close()


def sql(conn: Any, statement: str, *args: Any) -> None:
    with conn.cursor() as cur:
        cur.execute(statement, args)


def start(url: str, offsets: MemoryOffsets, **props: str) -> PostgresSourceTask:
    task = PostgresSourceTask()
    task.initialize(FakeSourceContext(offsets))
    task.start({"connection.url": url, "table.whitelist": "items", "topic.prefix": "pg-",
                "poll.interval.ms": "20", "batch.max.rows": "4", **props})
    return task


def poll_n(task: PostgresSourceTask, n: int, timeout: float = 10.0) -> list[SourceRecord]:
    """Poll until ``n`` records came (then once more, to see there are no more)."""
    out: list[SourceRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} records"
        out.extend(task.poll() or [])
    out.extend(task.poll() or [])
    return out


def names(records: list[SourceRecord]) -> list[str]:
    return [r.value["name"] for r in records]


def test_source_resolves_by_alias() -> None:
    assert load("PostgresSource") is PostgresSourceConnector


def test_timestamp_offsets_round_trip() -> None:
    ts = dt.datetime(2026, 3, 4, 5, 6, 7, 891011)
    assert ts_offset(ts) == {"timestamp": 1772600767891, "timestamp_nanos": 891011000}
    assert ts_from_offset(ts_offset(ts)) == ts


def test_connector_checks_mode_columns() -> None:
    errors = PostgresSourceConnector().validate({"mode": "timestamp+incrementing",
                                                 "table.whitelist": "t"})
    assert set(errors) == {"incrementing.column.name", "timestamp.column.name"}
    c = PostgresSourceConnector()
    c.start({"connection.url": "postgresql://x/y", "mode": "bulk", "topic.prefix": "p",
             "table.whitelist": "a,b,c"})
    assert [t["table.whitelist"] for t in c.task_configs(2)] == ["a,c", "b"]


def test_incrementing_captures_inserts_in_order(postgres_url: str, db: Any) -> None:
    for i in range(6):
        sql(db, "INSERT INTO items (name, price, updated) VALUES (%s, 1.50, %s)", f"r{i}", BASE)
    task = start(postgres_url, MemoryOffsets(), mode="incrementing",
                 **{"incrementing.column.name": "id"})
    first = poll_n(task, 6)
    assert names(first) == [f"r{i}" for i in range(6)]
    r = first[0]
    assert r.topic == "pg-items" and r.key is None
    assert r.source_partition == {"table": "items"}
    assert [f.name for f in r.value_schema.fields] == ["id", "name", "price", "updated"]
    assert r.value["price"].as_tuple().exponent == -2
    assert r.value["updated"] == BASE.replace(tzinfo=dt.UTC)
    assert [x.source_offset for x in first] == [{"incrementing": i} for i in range(1, 7)]
    sql(db, "INSERT INTO items (name, updated) VALUES ('r6', %s)", BASE)
    sql(db, "UPDATE items SET name = 'changed' WHERE id = 1")  # not seen in this mode
    assert names(poll_n(task, 1)) == ["r6"]
    task.stop()


def test_timestamp_incrementing_captures_updates_and_resumes(postgres_url: str, db: Any) -> None:
    for i in range(5):
        sql(db, "INSERT INTO items (name, updated) VALUES (%s, %s)", f"r{i}",
            BASE + dt.timedelta(seconds=i // 2))  # ties: two rows per second
    offsets = MemoryOffsets()
    props = {"mode": "timestamp+incrementing", "incrementing.column.name": "id",
             "timestamp.column.name": "updated"}
    task = start(postgres_url, offsets, **props)
    got = poll_n(task, 5)
    assert names(got) == ["r0", "r1", "r2", "r3", "r4"]
    sql(db, "UPDATE items SET name = 'r1b', updated = %s WHERE id = 2",
        BASE + dt.timedelta(seconds=10))
    sql(db, "INSERT INTO items (name, updated) VALUES ('r5', %s)",
        BASE + dt.timedelta(seconds=11))
    got = poll_n(task, 2)
    assert names(got) == ["r1b", "r5"]
    task.stop()
    # Only the first three records' offsets were committed: a new task reads
    # the rest again (r3, r4 and the later changes), nothing lost.
    offsets.commit({"table": "items"}, poll_first := _third(postgres_url, props))
    task = start(postgres_url, offsets, **props)
    assert names(poll_n(task, 4)) == ["r3", "r4", "r1b", "r5"]
    task.stop()
    assert poll_first == {"incrementing": 3, **ts_offset(BASE + dt.timedelta(seconds=1))}


def _third(url: str, props: dict[str, str]) -> dict[str, Any]:
    task = start(url, MemoryOffsets(), **props)
    try:
        recs = poll_n(task, 3)
    finally:
        task.stop()
    return dict(sorted(recs, key=lambda r: r.value["id"])[2].source_offset)


def test_timestamp_mode_captures_updates(postgres_url: str, db: Any) -> None:
    sql(db, "INSERT INTO items (name, updated) VALUES ('a', %s), ('b', %s)",
        BASE, BASE + dt.timedelta(seconds=1))
    task = start(postgres_url, MemoryOffsets(), mode="timestamp",
                 **{"timestamp.column.name": "updated"})
    assert names(poll_n(task, 2)) == ["a", "b"]
    sql(db, "UPDATE items SET name = 'a2', updated = %s WHERE name = 'a'",
        BASE + dt.timedelta(seconds=5))
    got = poll_n(task, 1)
    assert names(got) == ["a2"]
    assert got[0].source_offset == ts_offset(BASE + dt.timedelta(seconds=5))
    task.stop()


def test_bulk_reads_everything_each_time_and_query_mode(postgres_url: str, db: Any) -> None:
    sql(db, "INSERT INTO items (name, updated) VALUES ('a', %s), ('b', %s)", BASE, BASE)
    task = start(postgres_url, MemoryOffsets(), mode="bulk")
    # Each poll (one interval apart) reads the whole table again.
    assert names(list(task.poll() or [])) == ["a", "b"]
    assert names(list(task.poll() or [])) == ["a", "b"]
    task.stop()
    task = PostgresSourceTask()
    task.initialize(FakeSourceContext(MemoryOffsets()))
    task.start({"connection.url": postgres_url,
                "query": "SELECT id, upper(name) AS name FROM items", "topic.prefix": "upper",
                "mode": "incrementing",
                "incrementing.column.name": "id", "poll.interval.ms": "20"})
    got = poll_n(task, 2)
    assert names(got) == ["A", "B"] and {r.topic for r in got} == {"upper"}
    assert got[0].source_partition == {"query": "SELECT id, upper(name) AS name FROM items"}
    task.stop()


def test_timestamp_delay_leaves_young_rows_for_later(postgres_url: str, db: Any) -> None:
    sql(db, "INSERT INTO items (name, updated) VALUES ('old', %s)", BASE)
    sql(db, "INSERT INTO items (name, updated) VALUES ('young', now() AT TIME ZONE 'UTC')")
    task = start(postgres_url, MemoryOffsets(), mode="timestamp+incrementing",
                 **{"incrementing.column.name": "id", "timestamp.column.name": "updated",
                    "timestamp.delay.interval.ms": "1500"})
    first = list(task.poll() or [])
    inserted = time.monotonic()
    assert names(first) == ["old"]  # 'young' is not 1.5 s old yet
    got = poll_n(task, 1)
    assert names(got) == ["young"]
    assert time.monotonic() - inserted > 1.0
    task.stop()
    assert task.poll() is None

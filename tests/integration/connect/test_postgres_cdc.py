"""The CDC source task against a real PostgreSQL server: snapshot then stream,
Debezium-shaped events in commit order, the slot acknowledged only as far as
records are, a restart from the committed offset losing and repeating nothing,
and heartbeats moving an idle slot."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2
import pytest

from odradek.connect.connectors.postgres import pgoutput
from odradek.connect.connectors.postgres.cdc import (
    PostgresCdcSourceConnector,
    PostgresCdcSourceTask,
)
from odradek.connect.data import SourceRecord
from odradek.connect.plugins import load

from .pgsupport import FakeSourceContext, MemoryOffsets


@pytest.fixture
def db(postgres_url: str) -> Iterator[Any]:
    conn = psycopg2.connect(postgres_url)
    conn.autocommit = True
    yield conn
    # Slots are the server's, not the database's: drop this test's.
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                    " WHERE database = current_database() AND NOT active")
    conn.close()


def sql(conn: Any, *statements: str) -> None:
    """``statements`` in one transaction."""
    with conn.cursor() as cur:
        cur.execute("BEGIN; " + "; ".join(statements) + "; COMMIT")


def scalar(conn: Any, query: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(query)
        return cur.fetchone()[0]


def slot_name(url: str) -> str:
    """A slot per test database (slot names are unique in the whole server)."""
    return "slot_" + url.rsplit("/", 1)[1]


def start(url: str, offsets: MemoryOffsets, **props: str) -> PostgresCdcSourceTask:
    task = PostgresCdcSourceTask()
    task.initialize(FakeSourceContext(offsets))
    task.start({"connection.url": url, "topic.prefix": "shop",
                "slot.name": slot_name(url),
                "poll.interval.ms": "50", **props})
    return task


def poll_n(task: PostgresCdcSourceTask, n: int, timeout: float = 20.0) -> list[SourceRecord]:
    out: list[SourceRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n}: {summary(out)}"
        out.extend(task.poll() or [])
    out.extend(task.poll() or [])  # and no more
    return out


def wait_for(cond: Callable[[], bool], what: str, poll: Callable[[], object],
             timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        poll()


def summary(records: list[SourceRecord]) -> list[tuple[Any, ...]]:
    """(op, key id, before name, after name) per record; tombstones ("tomb", id)."""
    out: list[tuple[Any, ...]] = []
    for r in records:
        if r.value is None:
            out.append(("tomb", r.key["id"]))
            continue
        b, a = r.value["before"], r.value["after"]
        out.append((r.value["op"], r.key["id"], b and b["name"], a and a["name"]))
    return out


def confirmed(conn: Any) -> int:
    text = scalar(conn, "SELECT confirmed_flush_lsn FROM pg_replication_slots"
                        " WHERE database = current_database()")
    return pgoutput.lsn_int(text)


def ack(task: PostgresCdcSourceTask, offsets: MemoryOffsets,
        records: list[SourceRecord]) -> None:
    """As a worker: the producer acknowledged ``records``; their offsets are committed."""
    for r in records:
        task.commit_record(r, None)
        offsets.commit(r.source_partition, r.source_offset)
    task.commit()


def test_cdc_resolves_by_alias() -> None:
    assert load("PostgresCdcSource") is PostgresCdcSourceConnector
    assert PostgresCdcSourceConnector().task_class() is PostgresCdcSourceTask


def test_decodes_pgoutput_messages() -> None:
    body = (b"I" + (16384).to_bytes(4, "big") + b"N" + (3).to_bytes(2, "big")
            + b"t" + (2).to_bytes(4, "big") + b"42" + b"n" + b"u")
    assert pgoutput.decode(body) == pgoutput.Insert(16384, ["42", None, pgoutput.UNCHANGED])
    begin = b"B" + (0x1_0000_0010).to_bytes(8, "big") + (0).to_bytes(8, "big") + \
        (7).to_bytes(4, "big")
    assert pgoutput.decode(begin) == pgoutput.Begin(0x1_0000_0010, 946_684_800_000_000, 7)
    assert pgoutput.lsn_str(0x1_0000_0010) == "1/10"
    assert pgoutput.lsn_int("1/10") == 0x1_0000_0010


def test_snapshot_stream_ack_and_restart(postgres_url: str, db: Any) -> None:
    sql(db, "CREATE TABLE items (id integer PRIMARY KEY, name text, n numeric(6,1))",
        "ALTER TABLE items REPLICA IDENTITY FULL",
        "CREATE TABLE other (x integer)",
        "INSERT INTO items VALUES (1, 'one', 1.5), (2, 'two', 2.0)")
    offsets = MemoryOffsets()
    props = {"table.include.list": "public.items"}
    task = start(postgres_url, offsets, **props)
    snap = poll_n(task, 2)
    assert summary(snap) == [("r", 1, None, "one"), ("r", 2, None, "two")]
    assert [r.source_offset.get("last_snapshot_record") for r in snap] == [False, True]
    assert snap[1].value["source"]["snapshot"] == "last"
    first = snap[0]
    assert first.topic == "shop.public.items"
    assert first.key_schema is not None and first.key_schema.name == "shop.public.items.Key"
    assert first.value_schema is not None
    assert first.value_schema.name == "shop.public.items.Envelope"
    assert str(first.value["after"]["n"]) == "1.5"
    assert first.value["source"]["table"] == "items"
    assert first.source_partition == {"server": "shop"}

    sql(db, "INSERT INTO items VALUES (3, 'three', 3)")
    sql(db, "UPDATE items SET name = 'uno' WHERE id = 1", "INSERT INTO other VALUES (1)")
    sql(db, "DELETE FROM items WHERE id = 2")
    sql(db, "INSERT INTO items VALUES (4, 'four', 4)",
        "UPDATE items SET name = 'cuatro' WHERE id = 4", "DELETE FROM items WHERE id = 3")
    got = poll_n(task, 8)
    assert summary(got) == [
        ("c", 3, None, "three"), ("u", 1, "one", "uno"), ("d", 2, "two", None), ("tomb", 2),
        ("c", 4, None, "four"), ("u", 4, "four", "cuatro"), ("d", 3, "three", None),
        ("tomb", 3)]
    txids = [r.source_offset["txId"] for r in got]
    assert txids[4] == txids[5] == txids[6] == txids[7] != txids[3]
    assert got[0].value["source"]["lsn"] is not None and got[0].value["ts_ms"] > 0

    # Nothing acknowledged: the slot stays at its consistent point.
    before = confirmed(db)
    task.poll()
    assert confirmed(db) == before
    # Acknowledge the snapshot and the first 5 streamed records (into the last
    # transaction): the slot moves to the end of the third transaction only.
    ack(task, offsets, snap + got[:5])
    third_end = got[3].source_offset["lsn_commit"]
    assert got[4].source_offset["lsn_commit"] == third_end
    wait_for(lambda: confirmed(db) == third_end, "the slot at the acknowledged LSN",
             task.poll)
    task.stop()

    sql(db, "INSERT INTO items VALUES (5, 'five', 5)")
    task = start(postgres_url, offsets, **props)
    rest = poll_n(task, 4)
    assert summary(rest) == [("u", 4, "four", "cuatro"), ("d", 3, "three", None),
                             ("tomb", 3), ("c", 5, None, "five")]
    ack(task, offsets, rest)
    wait_for(lambda: confirmed(db) == rest[-1].source_offset["lsn_commit"],
             "the slot at the last transaction", task.poll)
    task.stop()


def test_an_unfinished_snapshot_is_taken_again(postgres_url: str, db: Any) -> None:
    sql(db, "CREATE TABLE items (id integer PRIMARY KEY, name text)",
        "INSERT INTO items SELECT i, 'n' || i FROM generate_series(1, 5) i")
    offsets = MemoryOffsets()
    props = {"max.batch.size": "2", "publication.autocreate.mode": "filtered",
             "table.include.list": "public.items"}
    task = start(postgres_url, offsets, **props)
    part = list(task.poll() or [])
    # Two rows read; the second is held back until it is known not to be the last.
    assert summary(part) == [("r", 1, None, "n1")]
    ack(task, offsets, part)  # committed, but the snapshot is not finished
    task.stop()
    sql(db, "INSERT INTO items VALUES (6, 'n6')")
    task = start(postgres_url, offsets, **props)
    again = poll_n(task, 6)
    assert summary(again) == [("r", i, None, f"n{i}") for i in range(1, 7)]
    assert again[-1].source_offset["last_snapshot_record"] is True
    sql(db, "INSERT INTO items VALUES (7, 'n7')")
    assert summary(poll_n(task, 1)) == [("c", 7, None, "n7")]
    task.stop()
    assert scalar(db, "SELECT string_agg(tablename, ',') FROM pg_publication_tables"
                      " WHERE pubname = 'dbz_publication'") == "items"


def test_a_key_change_is_a_delete_and_a_create(postgres_url: str, db: Any) -> None:
    sql(db, "CREATE TABLE items (id integer PRIMARY KEY, name text)",
        "INSERT INTO items VALUES (1, 'a')")
    task = start(postgres_url, MemoryOffsets(), **{"snapshot.mode": "never"})
    assert task.poll() == []
    sql(db, "UPDATE items SET id = 2, name = 'b' WHERE id = 1")
    # REPLICA IDENTITY DEFAULT: the old image holds the key columns only.
    assert summary(poll_n(task, 3)) == [("d", 1, None, None), ("tomb", 1),
                                        ("c", 2, None, "b")]
    task.stop()


def test_committed_offsets_move_the_slot_without_record_acks(postgres_url: str, db: Any) -> None:
    """A worker that commits offsets but skips ``commit_record`` for a record
    (one an error handler dropped) does not stall the slot."""
    sql(db, "CREATE TABLE items (id integer PRIMARY KEY, name text)")
    offsets = MemoryOffsets()
    task = start(postgres_url, offsets, **{"snapshot.mode": "never"})
    assert task.poll() == []
    sql(db, "INSERT INTO items VALUES (1, 'a')")
    sql(db, "INSERT INTO items VALUES (2, 'b')")
    first, second = poll_n(task, 2)
    task.commit_record(second, None)  # the first is never acknowledged
    task.poll()
    assert confirmed(db) < first.source_offset["lsn_commit"]
    offsets.commit(second.source_partition, second.source_offset)
    task.commit()
    wait_for(lambda: confirmed(db) == second.source_offset["lsn_commit"],
             "the slot at the committed offset", task.poll)
    assert len(task.acks) == 0
    task.stop()


def test_heartbeats_move_an_idle_slot(postgres_url: str, db: Any) -> None:
    sql(db, "CREATE TABLE items (id integer PRIMARY KEY, name text)",
        "CREATE TABLE noise (x integer)")
    offsets = MemoryOffsets()
    task = start(postgres_url, offsets, **{"table.include.list": "public.items",
                                     "heartbeat.interval.ms": "100", "snapshot.mode": "never"})
    for i in range(20):
        sql(db, f"INSERT INTO noise VALUES ({i})")
    target = pgoutput.lsn_int(scalar(db, "SELECT pg_current_wal_insert_lsn()::text"))
    beats: list[SourceRecord] = []

    def step() -> None:
        got = list(task.poll() or [])
        assert all(r.topic == "__debezium-heartbeat.shop" for r in got)
        beats.extend(got)
        ack(task, offsets, got)

    wait_for(lambda: confirmed(db) >= target, "heartbeats moved the slot", step)
    assert beats and beats[0].key == {"serverName": "shop"}
    task.stop()

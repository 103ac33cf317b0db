"""The PostgreSQL sink's records per second against a hand-written psycopg2 loop.

    python benchmarks/connect_pg_bench.py [--records 100000] [--keys 5000] [--runs 3]

A private PostgreSQL server (``odradek.testing.postgres``, from the installed
binaries) and, alternating, in fresh tables of the same shape:

- ``PostgresSinkTask``: upsert mode, ``pk.mode=record_key``, STRUCT values
  ``{id int64, name string, n int32}``, ``put`` batches of ``--batch``
  records, each ``put`` one transaction, as a worker would call it;
- the baseline: the same records as tuples, deduplicated per batch (the last
  value per key, as one ``INSERT ... ON CONFLICT`` statement needs), written
  with ``execute_values`` and committed per batch: what one would write by hand.

``--keys`` distinct keys, so most records update a row. Median records per
second of ``--runs`` runs (min-max), and the sink's share of the baseline. The
Kafka side (consuming, converting) is not measured: this is the task's own cost.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import psycopg2
from psycopg2.extras import execute_values

from odradek.connect import data
from odradek.connect.api import SinkTaskContext, TopicPartition
from odradek.connect.connectors.postgres.sink import PostgresSinkTask
from odradek.connect.data import Schema, SinkRecord
from odradek.testing.postgres import PostgresServer

KEY = data.struct(("id", Schema(data.INT64)))
VALUE = data.struct(("id", Schema(data.INT64)), ("name", data.OPTIONAL_STRING),
                    ("n", Schema(data.INT32, optional=True)))


class _Context(SinkTaskContext):
    configs: dict[str, str] = {}

    def offset(self, offsets: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition("items", 0)}

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass


def _records(count: int, keys: int) -> list[tuple[int, str, int]]:
    rng = random.Random(7)
    return [(k, f"v{i}", i) for i, k in enumerate(rng.randrange(keys) for _ in range(count))]


def _sink(url: str, table: str, rows: list[tuple[int, str, int]], batch: int) -> float:
    task = PostgresSinkTask()
    task.initialize(_Context())
    task.start({"connection.url": url, "topics": "items", "table.name.format": table,
                "insert.mode": "upsert", "pk.mode": "record_key", "auto.create": "true",
                "batch.size": str(batch)})
    records = [SinkRecord("items", 0, KEY, {"id": k}, VALUE, {"id": k, "name": s, "n": n},
                          kafka_offset=i) for i, (k, s, n) in enumerate(rows)]
    start = time.perf_counter()
    for i in range(0, len(records), batch):
        task.put(records[i:i + batch])
    elapsed = time.perf_counter() - start
    task.stop()
    return len(records) / elapsed


def _by_hand(url: str, table: str, rows: list[tuple[int, str, int]], batch: int) -> float:
    conn = psycopg2.connect(url)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text, n integer)")
    conn.commit()
    start = time.perf_counter()
    for i in range(0, len(rows), batch):
        last = {r[0]: r for r in rows[i:i + batch]}
        with conn.cursor() as cur:
            execute_values(cur, f"INSERT INTO {table} (id, name, n) VALUES %s ON CONFLICT (id)"
                           " DO UPDATE SET name = EXCLUDED.name, n = EXCLUDED.n",
                           list(last.values()), page_size=batch)
        conn.commit()
    elapsed = time.perf_counter() - start
    conn.close()
    return len(rows) / elapsed


def measure(records: int, keys: int, runs: int, batch: int) -> dict[str, list[float]]:
    rows = _records(records, keys)
    out: dict[str, list[float]] = {"sink": [], "hand": []}
    with PostgresServer() as server:
        for run in range(runs):
            out["sink"].append(_sink(server.url, f"sink_{run}", rows, batch))
            out["hand"].append(_by_hand(server.url, f"hand_{run}", rows, batch))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/connect_pg_bench.py")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args(argv)
    results = measure(args.records, args.keys, args.runs, args.batch)
    print(f"| upserts ({args.records:,} records, {args.keys:,} keys, batches of {args.batch}, "
          f"median of {args.runs}) | records/s | share of hand-written |")
    print("|---|---|---|")
    base = statistics.median(results["hand"])
    labels = {"sink": "PostgresSinkTask.put", "hand": "psycopg2 execute_values loop"}
    for name, values in results.items():
        med = statistics.median(values)
        print(f"| {labels[name]} | {med:,.0f} ({min(values):,.0f}-{max(values):,.0f}) "
              f"| {med / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

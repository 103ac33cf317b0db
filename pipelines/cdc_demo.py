"""PostgreSQL CDC → topic → Spark streaming aggregation → topic → PostgreSQL, one command.

    python3 -m pipelines.cdc_demo
    python3 -m pipelines.cdc_demo --bootstrap-server 127.0.0.1:9092 \\
        --postgres-dsn postgresql://postgres@127.0.0.1:5432/shop

Starts a broker (``odradek.testing.broker.Broker``) and a PostgreSQL
(``odradek.testing.postgres.PostgresServer``, needs the PostgreSQL 15+ server
binaries) unless given; creates the table ``orders (id, customer,
amount_cents)`` (``REPLICA IDENTITY FULL``, so updates and deletes carry the
old row) with a first set of rows; and runs, in this process:

- a standalone Connect worker with the **CDC source** (``PostgresCdcSource``):
  Debezium-shaped change events (``op`` ``r``/``c``/``u``/``d``, ``before``,
  ``after``) as schemaless JSON on ``<prefix>.public.orders``;
- a **Spark Structured Streaming** query reading that topic with
  ``format("odradek")``: each event becomes deltas (+after, -before), summed
  per customer (``revenue_cents``, ``orders``) in update mode; each
  micro-batch's changed totals are written with ``format("odradek")`` (from
  ``foreachBatch``) to ``<prefix>.customer-totals``, keyed by customer, as JSON
  with schema (``{"schema": ..., "payload": ...}``); a customer left with no
  orders is written as a tombstone (null value);
- the **PostgreSQL sink** (``PostgresSink``) on that topic: upserts by key into
  ``customer_totals (customer, revenue_cents, orders)`` and deletes on
  tombstones.

Then it inserts, updates (amounts and customers) and deletes orders, waits
(``--timeout``) until ``customer_totals`` equals the totals computed in Python
from ``orders``, prints both, and stops everything it started. Exit status 0
when the tables agreed; 1 when they did not by the deadline; 2 on a setup
error (one line). The tables are kept (the database must not hold them yet).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JSON = "org.apache.kafka.connect.json.JsonConverter"
KEY_SCHEMA = {"type": "struct", "name": "customer_key", "optional": False, "fields": [
    {"field": "customer", "type": "string", "optional": False}]}
VALUE_SCHEMA = {"type": "struct", "name": "customer_total", "optional": False, "fields": [
    {"field": "customer", "type": "string", "optional": False},
    {"field": "revenue_cents", "type": "int64", "optional": False},
    {"field": "orders", "type": "int64", "optional": False}]}
CUSTOMERS = ("ada", "bob", "cy", "dee", "eve", "fay")
Totals = dict[str, tuple[int, int]]
"""customer → (revenue_cents, orders)."""


class DemoError(Exception):
    """A setup failure, shown as one line."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m pipelines.cdc_demo",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    p.add_argument("--postgres-dsn", help="use this database instead of starting PostgreSQL")
    p.add_argument("--prefix", default="shop", help="topic prefix (default shop)")
    p.add_argument("--orders", type=int, default=40, help="orders inserted first")
    p.add_argument("--timeout", type=float, default=180, help="seconds to wait for the totals")
    p.add_argument("--seed", type=int, default=37)
    return p


def _connect(dsn: str) -> Any:
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def _exists(cur: Any, table: str) -> bool:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",))
    return bool(cur.fetchone()[0])


def create_orders(dsn: str, n: int, rng: random.Random) -> None:
    with contextlib.closing(_connect(dsn)) as conn, conn.cursor() as cur:
        for table in ("orders", "customer_totals"):
            if _exists(cur, table):
                raise DemoError(f"table {table} already exists in {dsn}: use an empty database")
        cur.execute("CREATE TABLE orders (id integer PRIMARY KEY, customer text NOT NULL,"
                    " amount_cents bigint NOT NULL); ALTER TABLE orders REPLICA IDENTITY FULL")
        for i in range(1, n + 1):
            cur.execute("INSERT INTO orders VALUES (%s, %s, %s)",
                        (i, rng.choice(CUSTOMERS[:-1]), rng.randrange(100, 10_000)))


def change_orders(dsn: str, n: int, rng: random.Random) -> None:
    """Inserts, updates of amounts and of customers, and deletes (every order
    of the last customer is inserted and then deleted: a tombstone)."""
    with contextlib.closing(_connect(dsn)) as conn, conn.cursor() as cur:
        for i in range(n + 1, n + 21):
            cur.execute("INSERT INTO orders VALUES (%s, %s, %s)",
                        (i, rng.choice(CUSTOMERS), rng.randrange(100, 10_000)))
        cur.execute("UPDATE orders SET amount_cents = amount_cents + 250 WHERE id % 4 = 0")
        cur.execute("UPDATE orders SET customer = %s WHERE id %% 7 = 0", (CUSTOMERS[0],))
        cur.execute("DELETE FROM orders WHERE id % 5 = 0")
        cur.execute("DELETE FROM orders WHERE customer = %s", (CUSTOMERS[-1],))
        cur.execute("INSERT INTO orders VALUES (%s, %s, %s)", (n + 100, CUSTOMERS[1], 1234))


def expected_totals(dsn: str) -> Totals:
    """The totals computed in Python from ``orders``."""
    with contextlib.closing(_connect(dsn)) as conn, conn.cursor() as cur:
        cur.execute("SELECT customer, amount_cents FROM orders")
        out: dict[str, list[int]] = {}
        for customer, amount in cur.fetchall():
            t = out.setdefault(customer, [0, 0])
            t[0] += amount
            t[1] += 1
    return {c: (r, n) for c, (r, n) in sorted(out.items())}


def table_totals(dsn: str) -> Totals:
    with contextlib.closing(_connect(dsn)) as conn, conn.cursor() as cur:
        if not _exists(cur, "customer_totals"):
            return {}
        cur.execute("SELECT customer, revenue_cents, orders FROM customer_totals"
                    " ORDER BY customer")
        return {c: (int(r), int(n)) for c, r, n in cur.fetchall()}


def build_query(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str) -> Any:
    """The streaming query: change events → deltas → per-customer sums → JSON
    with schema, keyed by customer, to ``sink`` (update mode)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    order = StructType([StructField("id", LongType()), StructField("customer", StringType()),
                        StructField("amount_cents", LongType())])
    event = StructType([StructField("op", StringType()), StructField("before", order),
                        StructField("after", order)])
    events = (spark.readStream.format("odradek")
              .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest").load()
              .select(F.from_json(F.col("value").cast("string"), event).alias("e"))
              .where(F.col("e.op").isNotNull()))  # tombstones parse to null
    added = (events.where(F.col("e.after").isNotNull())
             .select(F.col("e.after.customer").alias("customer"),
                     F.col("e.after.amount_cents").alias("revenue"), F.lit(1).alias("n")))
    removed = (events.where(F.col("e.before").isNotNull() & F.col("e.op").isin("u", "d"))
               .select(F.col("e.before.customer").alias("customer"),
                       (-F.col("e.before.amount_cents")).alias("revenue"),
                       F.lit(-1).alias("n")))
    totals = (added.unionByName(removed).groupBy("customer")
              .agg(F.sum("revenue").cast("long").alias("revenue_cents"),
                   F.sum("n").cast("long").alias("orders")))

    def with_schema(schema: dict[str, Any], payload: Any) -> Any:
        return F.concat(F.lit('{"schema":' + json.dumps(schema) + ',"payload":'),
                        F.to_json(payload), F.lit("}"))

    out = totals.select(
        with_schema(KEY_SCHEMA, F.struct("customer")).alias("key"),
        F.when(F.col("orders") > 0, with_schema(VALUE_SCHEMA, F.struct(
            "customer", "revenue_cents", "orders"))).alias("value"))

    def write(batch: Any, batch_id: int) -> None:
        (batch.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", sink).mode("append").save())

    # The odradek sink appends (a Python data source's stream writer takes no
    # update mode): each micro-batch's changed totals are written by a batch
    # write. A batch Spark runs again writes the same totals again, which the
    # upserting sink absorbs.
    return (out.writeStream.foreachBatch(write).queryName("customer_totals")
            .option("checkpointLocation", checkpoint).outputMode("update")
            .trigger(processingTime="1 second").start())


def stop_query(query: Any) -> None:
    """Stop between two micro-batches (stopping one mid-batch kills its tasks)."""
    deadline = time.monotonic() + 10
    while query.isActive and query.status.get("isTriggerActive") and (
            time.monotonic() < deadline):
        time.sleep(0.05)
    query.stop()


def connector_configs(dsn: str, prefix: str, slot: str) -> list[dict[str, str]]:
    return [
        {"name": "orders-cdc", "connector.class": "PostgresCdcSource", "connection.url": dsn,
         "topic.prefix": prefix, "slot.name": slot, "publication.name": f"{slot}_pub",
         "publication.autocreate.mode": "filtered",
         "table.include.list": "public.orders", "poll.interval.ms": "100",
         "key.converter": JSON, "key.converter.schemas.enable": "false",
         "value.converter": JSON, "value.converter.schemas.enable": "false"},
        {"name": "totals-sink", "connector.class": "PostgresSink", "connection.url": dsn,
         "topics": f"{prefix}.customer-totals", "table.name.format": "customer_totals",
         "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
         "auto.create": "true", "key.converter": JSON, "value.converter": JSON},
    ]


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from odradek.testing.broker import Broker

    with Broker() as broker:
        print(f"cdc-demo: broker on {broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers


@contextlib.contextmanager
def _postgres(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from odradek.testing.postgres import PostgresServer

    try:
        server = PostgresServer()
    except FileNotFoundError as e:
        raise DemoError(f"{e} (or pass --postgres-dsn)") from None
    with server:
        print(f"cdc-demo: PostgreSQL on {server.url}", flush=True)
        yield server.url


@contextlib.contextmanager
def _spark(given: Any) -> Iterator[Any]:
    if given is not None:
        yield given
        return
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("cdc-demo")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield spark
    finally:
        spark.stop()


def _create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for name, future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).items():
        try:
            future.result(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise DemoError(f"cannot create topic {name}: {e.args[0].str()}") from None


def _check_connectors(worker: Any) -> None:
    """Raise DemoError naming a FAILED connector or task and its error."""
    for name in worker.herder.names():
        status = worker.herder.status(name)
        for part in [status["connector"], *status["tasks"]]:
            if part["state"] == "FAILED":
                lines = (part.get("trace") or "").strip().splitlines()
                raise DemoError(f"connector {name} failed: {lines[-1] if lines else '?'}")


def _drop_slot(dsn: str, slot: str, timeout: float = 10.0) -> None:
    """Drop the demo's replication slot (a kept slot holds WAL forever) once the
    stopped source has let go of it; best effort."""
    deadline = time.monotonic() + timeout
    with contextlib.suppress(Exception), contextlib.closing(_connect(dsn)) as conn, \
            conn.cursor() as cur:
        while True:
            cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                        (slot,))
            row = cur.fetchone()
            if row is None:
                return
            if not row[0]:
                cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            if time.monotonic() > deadline:
                print(f"cdc-demo: replication slot {slot} still in use; not dropped",
                      file=sys.stderr)
                return
            time.sleep(0.1)


def run(args: argparse.Namespace, spark: Any = None) -> bool:
    """The whole demo; True when ``customer_totals`` reached the expected totals."""
    from odradek.connect.runtime.worker import StandaloneWorker

    rng = random.Random(args.seed)
    source, sink = f"{args.prefix}.public.orders", f"{args.prefix}.customer-totals"
    with _broker(args.bootstrap_server) as bootstrap, _postgres(args.postgres_dsn) as dsn, \
            tempfile.TemporaryDirectory(prefix="odradek-cdc-demo-") as work:
        create_orders(dsn, args.orders, rng)
        _create_topics(bootstrap, source, sink)
        slot = "cdc_demo_" + dsn.rsplit("/", 1)[-1].replace("-", "_")
        worker = StandaloneWorker({
            "bootstrap.servers": bootstrap, "key.converter": JSON, "value.converter": JSON,
            "offset.storage.file.filename": str(Path(work) / "connect.offsets"),
            "offset.flush.interval.ms": "1000", "listeners": "http://127.0.0.1:0"},
            connector_configs(dsn, args.prefix, slot))
        url = worker.start_in_thread()
        print(f"cdc-demo: Connect worker at {url} (orders-cdc → {source}, "
              f"{sink} → totals-sink)", flush=True)
        try:
            with _spark(spark) as session:
                query = build_query(session, bootstrap, source, sink,
                                    str(Path(work) / "checkpoint"))
                try:
                    change_orders(dsn, args.orders, rng)
                    want = expected_totals(dsn)
                    got: Totals = {}
                    deadline = time.monotonic() + args.timeout
                    while time.monotonic() < deadline and got != want:
                        if query.exception() is not None:
                            raise DemoError(f"the Spark query failed: {query.exception()}")
                        _check_connectors(worker)
                        time.sleep(0.5)
                        got = table_totals(dsn)
                finally:
                    stop_query(query)
        finally:
            worker.stop_thread()
            _drop_slot(dsn, slot)
    _show("expected (from orders)", want)
    _show("customer_totals", got)
    return got == want


def _show(title: str, totals: Totals) -> None:
    print(f"cdc-demo: {title}:", flush=True)
    for customer, (revenue, n) in totals.items():
        print(f"  {customer:<8} revenue {revenue / 100:>10.2f}  orders {n:>3}", flush=True)


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    """``spark``: a SparkSession to use (tests); otherwise one is started."""
    args = parser().parse_args(argv)
    try:
        ok = run(args, spark)
    except DemoError as e:
        print(f"cdc-demo: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cdc-demo: interrupted", file=sys.stderr)
        return 130
    print("cdc-demo: " + ("customer_totals equals the totals of orders" if ok
                          else "customer_totals did not reach the totals in time"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

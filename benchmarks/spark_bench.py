"""Spark figures for format("odradek"), with baselines from the same run.

    python benchmarks/spark_bench.py [--records 1000000] [--runs 3] [--quick]

Data: ``--records`` records of 100-byte values and 10-byte keys in a
4-partition topic of an ``odradek serve`` subprocess; Spark on ``local[2]``.

(a) Executor read path outside Spark (one process, partitions in turn): the
    connector's confluent-kafka reader (``read_range``) against Odradek's own
    asyncio client decoding the same ranges into the same Arrow columns. This
    is the measurement behind the connector's choice of client.
(b) Batch read of every record to the ``noop`` sink; baseline: Spark reading
    the same rows from a local Parquet copy.
(c) Streaming read, ``Trigger.AvailableNow`` with ``maxOffsetsPerTrigger``
    (250,000 by default; 1/4 of the records), to ``noop``: rows / wall time
    from ``start()`` to termination, per-batch overhead included. Baseline:
    the batch read of (b).
(d) Write of the records (key, value) to a new topic; baseline: the same
    DataFrame written to ``noop``.
(e) Streaming copy of the topic to a new 4-partition topic, AvailableNow
    with the same ``maxOffsetsPerTrigger`` as (c): the sink at-least-once
    (the default) and with ``exactlyOnce=true`` (a transaction per task, see
    ``src/odradek/spark/sink.py``), alternating run by run; the ratio is
    exactly-once / at-least-once.

Medians of ``--runs`` runs with min-max.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import broker_process

PARTITIONS = 4


def fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                         "compression.type": "none"})
    value = b"v" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"k%09d" % i, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0


def _summary(values: list[float]) -> str:
    return (f"{statistics.median(values) / 1000:8.0f}k rows/s "
            f"(min {min(values) / 1000:.0f}k, max {max(values) / 1000:.0f}k)")


def _timed(runs: int, rows: int, body: Callable[[int], None]) -> list[float]:
    rates = []
    for run in range(runs):
        t0 = time.perf_counter()
        body(run)
        rates.append(rows / (time.perf_counter() - t0))
    return rates


def client_read_rates(
    bootstrap: str, topic: str, records: int, runs: int
) -> dict[str, list[float]]:
    import pyarrow as pa

    from odradek.client.client import KafkaClient
    from odradek.spark.kafka import read_range
    from odradek.spark.offsets import Range
    from odradek.spark.options import parse_source

    per = records // PARTITIONS
    options = parse_source({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, False)

    def confluent(_: int) -> None:
        n = 0
        for p in range(PARTITIONS):
            n += sum(b.num_rows for b in read_range(options, Range(topic, p, 0, per)))
        assert n == per * PARTITIONS, n

    async def own_client() -> int:
        client = await KafkaClient.connect(bootstrap)
        leaders = await client.partitions(topic)
        n = 0
        for p in range(PARTITIONS):
            offset = 0
            while offset < per:
                fetched, _ = await client.fetch(topic, leaders[p], {p: offset},
                                                partition_max_bytes=8 << 20)
                rs = [r for r in fetched[p] if r.offset < per]
                pa.RecordBatch.from_arrays([
                    pa.array([r.key for r in rs], pa.binary()),
                    pa.array([r.value for r in rs], pa.binary()),
                    pa.array([r.offset for r in rs], pa.int64()),
                    pa.array([r.timestamp * 1000 for r in rs], pa.int64()),
                ], names=["key", "value", "offset", "timestamp"])
                n += len(rs)
                offset = rs[-1].offset + 1 if rs else offset
        await client.close()
        return n

    def own(_: int) -> None:
        assert asyncio.run(own_client()) == per * PARTITIONS

    total = per * PARTITIONS
    return {"confluent-kafka": _timed(runs, total, confluent),
            "odradek client": _timed(runs, total, own)}


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def measure(bootstrap: str, records: int, runs: int, max_offsets: int, work: Path,
            log: Callable[[str], None] = print) -> dict[str, list[float]]:
    """Phases (b)-(d) on a topic ``bench`` already holding ``records`` records;
    rows/s per run under the names printed by :func:`main`."""
    out: dict[str, list[float]] = {}
    spark = spark_session()
    try:
        source = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "bench"))
        source.load().limit(1).collect()  # start the Python workers before any clock
        parquet = str(work / "copy.parquet")
        source.load().write.mode("overwrite").parquet(parquet)
        out["batch"] = _timed(runs, records, lambda _: source.load().write.format("noop")
                              .mode("overwrite").save())
        out["batch parquet"] = _timed(runs, records, lambda _: spark.read.parquet(parquet)
                                      .write.format("noop").mode("overwrite").save())
        log(f"spark batch read {_summary(out['batch'])}")

        def stream(limit: int, steady: list[float]) -> Callable[[int], None]:
            def run_once(run: int) -> None:
                reader = (spark.readStream.format("odradek")
                          .option("kafka.bootstrap.servers", bootstrap)
                          .option("subscribe", "bench").option("startingOffsets", "earliest")
                          .option("commitOffsetsToGroup", "false"))
                if limit:
                    reader = reader.option("maxOffsetsPerTrigger", str(limit))
                checkpoint = work / f"cp-{limit}-{run}-{time.time_ns()}"
                query = (reader.load().writeStream.format("noop")
                         .option("checkpointLocation", str(checkpoint))
                         .trigger(availableNow=True).start())
                query.awaitTermination()
                progress = [p for p in query.recentProgress if p["numInputRows"]]
                got = sum(p["numInputRows"] for p in progress)
                assert got == records, got
                busy_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
                steady.append(got / busy_ms * 1000)
            return run_once

        for name, limit in (("stream limited", max_offsets), ("stream one batch", 0)):
            steady: list[float] = []
            out[name] = _timed(runs, records, stream(limit, steady))
            out[f"{name} in batches"] = steady
            log(f"spark {name} {_summary(out[name])}")

        frame = spark.read.parquet(parquet).select("key", "value").cache()
        frame.count()

        def write(run: int) -> None:
            (frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", f"written-{run}-{time.time_ns()}").mode("append").save())

        out["write"] = _timed(runs, records, write)
        out["write noop"] = _timed(runs, records, lambda _: frame.write.format("noop")
                                   .mode("overwrite").save())
        log(f"spark write {_summary(out['write'])}")

        out.update(stream_write_rates(spark, bootstrap, records, runs, max_offsets, work))
        log(f"spark stream write at-least-once {_summary(out['stream write'])}")
        log(f"spark stream write exactly-once {_summary(out['stream write eos'])}")
    finally:
        spark.stop()
    return out


def stream_write_rates(spark: Any, bootstrap: str, records: int, runs: int,
                       max_offsets: int, work: Path) -> dict[str, list[float]]:
    """(e): topic ``bench`` copied by a streaming query to a fresh topic, at-least-once
    and exactly-once in turn; rows/s from ``start()`` to termination and inside
    the micro-batches (triggerExecution)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, list[float]] = {"stream write": [], "stream write eos": [],
                                   "stream write in batches": [],
                                   "stream write eos in batches": []}
    for run in range(runs):
        for name, eos in (("stream write", False), ("stream write eos", True)):
            topic = f"copy-{'eos' if eos else 'alo'}-{run}-{time.time_ns()}"
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            writer = (spark.readStream.format("odradek")
                      .option("kafka.bootstrap.servers", bootstrap).option("subscribe", "bench")
                      .option("startingOffsets", "earliest")
                      .option("commitOffsetsToGroup", "false")
                      .option("maxOffsetsPerTrigger", str(max_offsets)).load()
                      .select("key", "value").writeStream.format("odradek")
                      .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                      .option("checkpointLocation", str(work / f"cp-{topic}"))
                      .trigger(availableNow=True))
            if eos:
                writer = writer.option("exactlyOnce", "true")
            t0 = time.perf_counter()
            query = writer.start()
            query.awaitTermination()
            wall = time.perf_counter() - t0
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            got = sum(p["numInputRows"] for p in progress)
            assert got == records, got
            busy_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
            out[name].append(records / wall)
            out[f"{name} in batches"].append(got / busy_ms * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-offsets", type=int, default=0,
                        help="maxOffsetsPerTrigger of the streaming read (default records/4)")
    parser.add_argument("--quick", action="store_true", help="200k records, 2 runs")
    args = parser.parse_args()
    if args.quick:
        args.records, args.runs = 200_000, 2
    records = args.records - args.records % PARTITIONS
    max_offsets = args.max_offsets or records // 4
    work = Path(tempfile.mkdtemp(prefix="odradek-spark-bench-"))
    with broker_process() as broker:
        bootstrap = broker.bootstrap
        t0 = time.perf_counter()
        fill(bootstrap, "bench", records)
        print(f"{records} records of 100 B in {PARTITIONS} partitions, produced in "
              f"{time.perf_counter() - t0:.1f} s; runs: {args.runs}")

        clients = client_read_rates(bootstrap, "bench", records, args.runs)
        print("\n(a) executor read path, outside Spark")
        for name, rates in clients.items():
            print(f"    {name:16} {_summary(rates)}")
        ratio = statistics.median(clients["confluent-kafka"]) / statistics.median(
            clients["odradek client"])
        print(f"    confluent-kafka / odradek client: {ratio:.2f}")

        r = measure(bootstrap, records, args.runs, max_offsets, work, log=lambda _: None)

    def ratio_of(a: str, b: str) -> str:
        return f"{statistics.median(r[a]) / statistics.median(r[b]):.2f}"

    print("\n(b) batch read -> noop")
    print(f"    odradek source   {_summary(r['batch'])}")
    print(f"    parquet baseline {_summary(r['batch parquet'])}")
    print(f"    odradek / parquet: {ratio_of('batch', 'batch parquet')}")
    print("\n(c) streaming read, AvailableNow -> noop")
    print("    wall: from start() to termination (query start-up included); in batches:"
          " rows / the micro-batches' triggerExecution time")
    for name, what in (("stream limited", f"maxOffsetsPerTrigger={max_offsets}"),
                       ("stream one batch", "one micro-batch")):
        print(f"    {what:28} wall {_summary(r[name])}   / batch read: "
              f"{ratio_of(name, 'batch')}")
        print(f"    {'':28} in batches {_summary(r[name + ' in batches'])}")
    print("    (goal: >= 400k rows/s)")
    print("\n(d) write (key, value) -> topic")
    print(f"    odradek sink     {_summary(r['write'])}")
    print(f"    noop baseline    {_summary(r['write noop'])}")
    print(f"    odradek / noop: {ratio_of('write', 'write noop')}")
    print(f"\n(e) streaming copy -> topic, AvailableNow, maxOffsetsPerTrigger={max_offsets}"
          f" ({PARTITIONS} tasks per micro-batch)")
    for name, what in (("stream write", "at-least-once"), ("stream write eos", "exactly-once")):
        print(f"    {what:16} wall {_summary(r[name])}")
        print(f"    {'':16} in batches {_summary(r[name + ' in batches'])}")
    print(f"    exactly-once / at-least-once: wall {ratio_of('stream write eos', 'stream write')}"
          f", in batches {ratio_of('stream write eos in batches', 'stream write in batches')}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

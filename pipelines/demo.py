"""One command for a whole pipeline: broker, generator, Spark job, live results.

    python pipelines/demo.py website      # page views per page per minute
    python pipelines/demo.py logs         # error-rate alerts per service

Starts ``odradek serve`` on a free port with a temporary data directory (or
uses ``--bootstrap``), a generator whose event time runs ``--speedup`` times
faster than the clock (1-minute windows close every few seconds), the
pipeline on ``local[*]``, and prints every result record as the pipeline
writes it to its output topic. Stops after ``--seconds`` or on Ctrl-C, and
stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate
import log_aggregation
import website_activity


def start_broker(data_dir: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "serve", "--log-level", "WARNING", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={data_dir}",
         "--override", "num.partitions=4"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"serving on (\S+)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"demo: the broker did not start: {line.strip()}")
    return proc, found.group(1)


def produce_forever(kind: str, bootstrap: str, topic: str, rate: float, speedup: float,
                    stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    source = generate.events(kind, random.Random(7), int(time.time() * 1000), speedup, 3000)
    key = "page" if kind == "pageviews" else "service"
    started, sent = time.monotonic(), 0
    while not stop.is_set():
        event = next(source)
        producer.produce(topic, key=str(event[key]).encode(), value=json.dumps(event).encode())
        sent += 1
        producer.poll(0)
        ahead = sent / rate - (time.monotonic() - started)
        if ahead > 0:
            stop.wait(ahead)
    producer.flush(10)


def show_results(bootstrap: str, topic: str, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-viewer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    while not stop.is_set():
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            print(f"  result  {m.value().decode()}", flush=True)
    consumer.close()


def run_spark(args: argparse.Namespace) -> int:
    """The Spark side (``--spark-child``): build the pipeline, run until SIGTERM,
    then stop each query between two micro-batches (stopping one mid-batch
    kills its tasks, and Spark prints their TaskKilledException) and Spark."""
    import signal

    from pyspark.sql import SparkSession

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    module = website_activity if args.pipeline == "website" else log_aggregation
    extra = (["--output-dir", os.path.join(args.work, "parquet")]
             if args.pipeline == "website" else [])
    pipeline_args = module.parser().parse_args([
        "--bootstrap", args.bootstrap, "--checkpoint", os.path.join(args.work, "checkpoint"),
        "--trigger-seconds", "2", "--watermark", "20 seconds", *extra,
    ])
    spark = (SparkSession.builder.master("local[*]").appName(f"demo-{args.pipeline}")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    queries = module.build(spark, pipeline_args)
    stop.wait()
    for q in queries:
        deadline = time.monotonic() + 10
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
        q.stop()
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pipeline", choices=["website", "logs"])
    p.add_argument("--bootstrap", help="use this broker instead of starting one")
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--rate", type=float, default=300, help="events per second")
    p.add_argument("--speedup", type=float, default=12, help="event time per wall time")
    p.add_argument("--spark-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.spark_child:
        return run_spark(args)
    # Ctrl-C reaches every process of the terminal's foreground group: Spark's
    # Python workers would die with tracebacks and the broker would stop under
    # its clients. So the broker and Spark run in sessions of their own, and
    # Ctrl-C (like --seconds) makes this process stop them in order: Spark's
    # queries between two batches, then the generator and viewer, then the broker.
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work = tempfile.TemporaryDirectory(prefix="odradek-demo-")
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker, bootstrap = start_broker(os.path.join(work.name, "data"))
        print(f"demo: broker on {bootstrap}", flush=True)
    kind, output = (("pageviews", "pageviews-per-minute") if args.pipeline == "website"
                    else ("logs", "alerts"))
    threads = [
        threading.Thread(target=produce_forever, daemon=True, args=(
            kind, bootstrap, kind, args.rate, args.speedup, stop)),
        threading.Thread(target=show_results, daemon=True, args=(bootstrap, output, stop)),
    ]
    spark = None
    try:
        for t in threads:
            t.start()
        print(f"demo: generating {kind} at {args.rate:g}/s, event time x{args.speedup:g}; "
              "starting Spark (first results in about 30 s)", flush=True)
        spark = subprocess.Popen(
            [sys.executable, __file__, args.pipeline, "--spark-child", "--bootstrap", bootstrap,
             "--work", work.name], start_new_session=True)
        deadline = time.monotonic() + args.seconds
        while not stop.is_set() and time.monotonic() < deadline and spark.poll() is None:
            stop.wait(0.2)
    finally:
        print("demo: stopping", flush=True)
        stop.set()
        if spark is not None and spark.poll() is None:
            spark.terminate()
            try:
                spark.wait(60)
            except subprocess.TimeoutExpired:
                spark.kill()
                spark.wait()
        for t in threads:
            t.join(15)
        if broker is not None:
            broker.terminate()
            broker.wait(30)
        work.cleanup()
    print("demo: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

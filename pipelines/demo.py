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
        ["odradek", "serve", "--log-level", "WARNING", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={data_dir}",
         "--override", "num.partitions=4"],
        stdout=subprocess.PIPE, text=True,
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pipeline", choices=["website", "logs"])
    p.add_argument("--bootstrap", help="use this broker instead of starting one")
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--rate", type=float, default=300, help="events per second")
    p.add_argument("--speedup", type=float, default=12, help="event time per wall time")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.TemporaryDirectory(prefix="odradek-demo-")
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker, bootstrap = start_broker(os.path.join(work.name, "data"))
        print(f"demo: broker on {bootstrap}", flush=True)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    queries = []
    spark = None
    try:
        if args.pipeline == "website":
            module, kind, output = website_activity, "pageviews", "pageviews-per-minute"
            extra = ["--output-dir", os.path.join(work.name, "parquet")]
        else:
            module, kind, output = log_aggregation, "logs", "alerts"  # type: ignore[assignment]
            extra = []
        pipeline_args = module.parser().parse_args([
            "--bootstrap", bootstrap, "--checkpoint", os.path.join(work.name, "checkpoint"),
            "--trigger-seconds", "2", "--watermark", "20 seconds", *extra,
        ])
        threads.append(threading.Thread(target=produce_forever, daemon=True, args=(
            kind, bootstrap, kind, args.rate, args.speedup, stop)))
        threads.append(threading.Thread(target=show_results, daemon=True,
                                        args=(bootstrap, output, stop)))
        for t in threads:
            t.start()
        print(f"demo: generating {kind} at {args.rate:g}/s, event time x{args.speedup:g}; "
              "starting Spark (first results in about 30 s)", flush=True)
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[*]").appName(f"demo-{args.pipeline}")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        queries = module.build(spark, pipeline_args)
        stop.wait(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for q in queries:
            q.stop()
        if spark is not None:
            spark.stop()
        for t in threads:
            t.join(15)
        if broker is not None:
            broker.terminate()
            broker.wait(30)
        work.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

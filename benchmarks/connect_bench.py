"""FileStreamSource throughput against a hand-written producer, same run.

    python benchmarks/connect_bench.py [--runs 3] [--lines 200000]

One ``odradek serve`` process; a file of ``--lines`` lines of about 100 bytes.
Each run, alternating, into a fresh one-partition topic:

- **hand-written**: a confluent-kafka producer (idempotent, ``acks=all``,
  ``linger.ms=5``, as the worker's) reads the file line by line and produces
  each line, then flushes;
- **connect**: an in-process standalone worker (StringConverter,
  ``offset.flush.interval.ms=100``) runs FileStreamSource (``batch.size``
  2000) on the file; the time is from the REST create to the offsets API
  showing the whole file committed (every record acknowledged).

Prints each run's records/s, then the medians and connect / hand-written.

Measured 2026-11-28 on the shared 2-core machine (``--runs 3 --lines
100000``, the worker and the hand-written producer in this process, the broker
in another): hand-written 149k records/s, connect 47k records/s (medians),
ratio 0.31. The worker's cost is per record in Python: the SourceRecord, the
two converters, the error handler around each stage, and a delivery callback
per record (offsets are committed only for acknowledged records).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import broker_process
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.connect.runtime.worker import StandaloneWorker


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)


def hand_written(bootstrap: str, path: Path, topic: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": "true",
                         "acks": "all", "linger.ms": "5"})
    start = time.perf_counter()
    with path.open("rb") as f:
        for line in f:
            while True:
                try:
                    producer.produce(topic, value=line[:-1])
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
    producer.flush(60)
    return time.perf_counter() - start


def _request(method: str, url: str, body: bytes | None = None) -> bytes:
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        data: bytes = resp.read()
        return data


def connect(worker_url: str, path: Path, topic: str, size: int) -> float:
    name = f"bench-{topic}"
    body = (f'{{"name": "{name}", "config": {{"connector.class": "FileStreamSource", '
            f'"file": "{path}", "topic": "{topic}"}}}}').encode()
    want = f'"position": {size}'.encode()
    start = time.perf_counter()
    _request("POST", f"{worker_url}/connectors", body)
    deadline = start + 600
    while want not in _request("GET", f"{worker_url}/connectors/{name}/offsets"):
        if time.perf_counter() > deadline:
            raise RuntimeError("the connector did not finish in 600 s")
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    _request("DELETE", f"{worker_url}/connectors/{name}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lines", type=int, default=200000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="connect-bench-"))
    path = tmp / "in.txt"
    with path.open("w", encoding="utf-8") as f:
        for i in range(args.lines):
            f.write(f"{i:08d} " + "x" * 91 + "\n")
    size = path.stat().st_size
    broker = broker_process()
    broker.start()
    try:
        worker = StandaloneWorker({
            "bootstrap.servers": broker.bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": str(tmp / "offsets.json"),
            "offset.flush.interval.ms": "100", "listeners": "http://127.0.0.1:0"})
        url = worker.start_in_thread()
        rates: dict[str, list[float]] = {"hand-written": [], "connect": []}
        try:
            for run in range(args.runs):
                for kind in ("hand-written", "connect"):
                    topic = f"{kind}-{run}"
                    _create(broker.bootstrap, topic)
                    elapsed = (hand_written(broker.bootstrap, path, topic)
                               if kind == "hand-written"
                               else connect(url, path, topic, size))
                    rates[kind].append(args.lines / elapsed)
                    print(f"run {run + 1} {kind:>12}: {args.lines / elapsed:10.0f} records/s "
                          f"({elapsed:.2f} s)", flush=True)
        finally:
            worker.stop_thread()
    finally:
        broker.stop()
    hand, conn = (statistics.median(rates[k]) for k in ("hand-written", "connect"))
    print(f"median hand-written {hand:.0f} records/s, connect {conn:.0f} records/s, "
          f"connect / hand-written {conn / hand:.2f}")


if __name__ == "__main__":
    main()

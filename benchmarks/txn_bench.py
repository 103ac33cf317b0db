"""Transactional produce throughput next to the idempotent producer, in one run.

    python benchmarks/txn_bench.py [--runs 3] [--records 20000] [--size 100]

Against ``odradek serve`` (a subprocess), one confluent-kafka producer writes
``--records`` values of ``--size`` bytes to a 1-partition topic:

* ``idempotent``: ``enable.idempotence=true``, one flush at the end (the
  baseline: what exactly-once costs is measured against it);
* ``txn x1000``: transactions of 1,000 records (begin, produce, commit);
* ``txn x10``: transactions of 10 records — dominated by the coordinator's
  round trips (AddPartitionsToTxn, EndTxn, the markers).

Median msg/s of ``--runs`` runs with min-max, and each ratio to the
idempotent producer of the same run. The broker and the client share the
machine's cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import broker_process


def _producer(bootstrap: str, **conf: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                     "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000,
                     **conf})


def idempotent(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    p = _producer(bootstrap, **{"enable.idempotence": True})
    p.produce(topic, value, partition=0)  # producer id and metadata before the clock,
    assert p.flush(30) == 0               # as init_transactions() is for the others
    t0 = time.perf_counter()
    for _ in range(records):
        p.produce(topic, value, partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    return records / (time.perf_counter() - t0)


def transactional(per_txn: int) -> Callable[[str, str, int, bytes], float]:
    def run(bootstrap: str, topic: str, records: int, value: bytes) -> float:
        p = _producer(bootstrap, **{"transactional.id": f"bench-{per_txn}-{time.time_ns()}"})
        p.init_transactions(30)
        p.begin_transaction()  # metadata before the clock, as for the idempotent case
        p.produce(topic, value, partition=0)
        p.commit_transaction(30)
        t0 = time.perf_counter()
        sent = 0
        while sent < records:
            p.begin_transaction()
            for _ in range(min(per_txn, records - sent)):
                p.produce(topic, value, partition=0)
                p.poll(0)
                sent += 1
            p.commit_transaction(60)
        return records / (time.perf_counter() - t0)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    value = b"x" * args.size
    cases: list[tuple[str, Callable[[str, str, int, bytes], float], int]] = [
        ("idempotent", idempotent, args.records),
        ("txn x1000", transactional(1000), args.records),
        ("txn x10", transactional(10), max(args.records // 20, 100)),
    ]
    results: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    with broker_process() as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        for run in range(args.runs):
            for name, fn, records in cases:
                topic = f"txn-bench-{run}-{name.replace(' ', '')}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                results[name].append(fn(server.bootstrap, topic, records, value))
    base = statistics.median(results["idempotent"])
    print(f"{'case':<12} {'msg/s (median)':>15} {'min-max':>22} {'vs idempotent':>14}")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<12} {med:>15,.0f} {min(values):>10,.0f}-{max(values):<10,.0f} "
              f"{med / base:>13.3f}x")


if __name__ == "__main__":
    main()

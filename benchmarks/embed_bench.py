"""Start and stop of the in-process broker, against librdkafka's mock cluster.

    python benchmarks/embed_bench.py [--runs 50]

Odradek: ``Broker().start()`` until it accepts connections (it returns only
once its listener is bound), and ``stop()`` until its thread, sockets and
temporary data directory are gone. Then a first request: a confluent-kafka
Producer's ``list_topics`` against it (so "ready" includes real serving).

Baseline in the same run: librdkafka's in-process mock cluster
(``test.mock.num.brokers=1``), from creating the Producer that hosts it to its
first ``list_topics`` answer, and destroying it. Median, min and max of
``--runs`` runs each.
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Producer

from odradek.testing.broker import Broker


def _summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):8.2f} ms  (min {min(ms):.2f}, max {max(ms):.2f})"


def odradek_cycle() -> tuple[float, float, float]:
    t0 = time.perf_counter()
    broker = Broker().start()
    t1 = time.perf_counter()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.list_topics(timeout=10)
    t2 = time.perf_counter()
    del producer
    t3 = time.perf_counter()
    broker.stop()
    t4 = time.perf_counter()
    return t1 - t0, t2 - t0, t4 - t3


def mock_cycle() -> tuple[float, float]:
    t0 = time.perf_counter()
    producer = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    producer.list_topics(timeout=10)
    t1 = time.perf_counter()
    del producer
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    odradek_cycle()  # warm imports
    mock_cycle()
    ours = [odradek_cycle() for _ in range(args.runs)]
    mock = [mock_cycle() for _ in range(args.runs)]
    start = [o[0] for o in ours]
    ready = [o[1] for o in ours]
    stop = [o[2] for o in ours]
    mock_ready = [m[0] for m in mock]
    mock_stop = [m[1] for m in mock]
    print(f"runs: {args.runs}")
    print(f"odradek Broker().start()           {_summary(start)}")
    print(f"odradek start + first list_topics  {_summary(ready)}")
    print(f"odradek stop()                     {_summary(stop)}")
    print(f"mock cluster up + first list_topics {_summary(mock_ready)}")
    print(f"mock cluster destroy               {_summary(mock_stop)}")
    ratio = statistics.median(ready) / statistics.median(mock_ready)
    print(f"ratio ready odradek/mock: {ratio:.2f}x (below 1 = odradek is faster)")
    print(f"goal: start-to-ready <= 100 ms median: "
          f"{'met' if statistics.median(start) <= 0.1 else 'NOT met'}")


if __name__ == "__main__":
    main()

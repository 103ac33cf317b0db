"""The cost of the metrics endpoint: the C producer (c/rdkbench.c on librdkafka)
at 1 KiB, acks=1, flat out, into two ``odradek serve`` processes started alike
but for ``odradek.metrics.listener``, alternating between them in one run;
the broker with the endpoint is scraped every half second (Prometheus scrapes
every 15 to 60 s: this is the pessimistic case) while it is produced to.

    python benchmarks/metrics_bench.py [--runs 5] [--count 300000]

Prints each run, then the broker's CPU time per scrape (CPU, not wall time:
the steadiest figure on a shared machine), then the medians of throughput and
of the broker's CPU seconds per GB of values, with metrics on over metrics off
(goal: within 3 %).

What differs between the two brokers: only the scrapes. The request
pipeline's ``metrics`` stage (counts, and each request's time in Kafka's
phases) runs with the endpoint off too; it costs about 4 µs of CPU per request
(measured on the stage alone; 3 µs before the phases were timed), a small
share of a produce request at this broker's batch sizes. A scrape renders every
family: about 1,100 series after these runs (the request phases' quantiles
are about a third of them), 2 to 3 ms of CPU.

Measured 2026-11-28 on the shared 2-core machine, under load from other work
(run-to-run spread of throughput ±30 %, so on/off differences of a few per cent
are not resolved by these medians; alternate, and read the CPU figures first):

- ``python3 -m benchmarks.metrics_bench`` three times (5 on/off pairs each, 300k
  records a run): on/off throughput 0.581, 1.043, 1.093 (median 1.043); CPU
  per GB 1.122, 1.054, 0.921 (median 1.054); broker CPU per scrape 3.5, 3.0,
  2.5 ms (20 scrapes each; median 3.0 ms).
- ``--count 1500000``, three times, alternating with the tree before this
  change: on/off throughput 1.295, 0.920, 1.028 (median 1.028; before: 1.052);
  CPU per GB 0.907, 1.032, 1.035 (median 1.032; before: 0.950); CPU per scrape
  median 2.0 ms (before: 2.5 ms), at a 0.5 ms resolution (now 60 scrapes).
- Broker CPU per scrape, 60 scrapes of a broker after some produce and consume
  traffic: 5.3 ms with 1,076 series, against 7.2 ms before with 694 (the
  rendering keeps each series' escaped label prefix between scrapes and
  re-estimates quantiles only for APIs with new requests). At 400k msg/s of
  1 KiB (about 0.5 CPU s/s of broker), two scrapes a second are 1 to 2 % of
  the broker's CPU; at Prometheus's usual 15 s, nothing measurable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite_c
import suite_kafka as kafka
from _common import broker_process, proc_cpu_seconds
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import free_port

SIZE = 1024
KINDS = ("off", "on")


class _Broker:
    """A suite_c target: the broker's address and its process's CPU time."""

    name = "odradek"

    def __init__(self, bootstrap: str, pid: int) -> None:
        self.bootstrap = bootstrap
        self.pid = pid

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)


SCRAPE_EVERY_S = 0.5


def _scrape(url: str, stop: threading.Event, scrapes: list[int]) -> None:
    while not stop.is_set():
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
        scrapes[0] += 1
        stop.wait(SCRAPE_EVERY_S)


SCRAPE_COST_N = 60


def scrape_cost_ms(url: str, pid: int, n: int = SCRAPE_COST_N) -> float:
    """The broker's CPU ms per scrape of ``url``: its CPU time over ``n`` scrapes,
    each after the endpoint's 0.5 s rendering reuse, less its CPU time over an
    idle stretch as long (CPU time, not wall time: a loaded machine slows it
    down but does not inflate it)."""
    gap = SCRAPE_EVERY_S * 1.1
    before = proc_cpu_seconds(pid)
    time.sleep(gap * n)
    idle = proc_cpu_seconds(pid) - before
    before = proc_cpu_seconds(pid)
    for _ in range(n):
        time.sleep(gap)
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
    busy = proc_cpu_seconds(pid) - before
    return (busy - idle) / n * 1000


def measure(runs: int, count: int) -> dict[str, list[tuple[float, float]]]:
    """(msg/s, broker CPU s per GB) of each run, by "off" and "on"; then, with the
    "on" broker holding the runs' request series, its CPU per scrape (printed)."""
    exe, why = suite_c.build()
    if exe is None:
        raise RuntimeError(f"metrics benchmark skipped: {why}")
    port = free_port()
    extra = os.environ.get("ODRADEK_BENCH_OVERRIDES", "").split()
    brokers = {"off": broker_process(*extra),
               "on": broker_process(f"odradek.metrics.listener=127.0.0.1:{port}", *extra)}
    for b in brokers.values():
        b.start()
    try:
        assert all(b.proc is not None for b in brokers.values())
        targets = {k: _Broker(b.bootstrap, b.proc.pid)  # type: ignore[union-attr]
                   for k, b in brokers.items()}
        admins = {k: AdminClient({"bootstrap.servers": t.bootstrap, "log_level": "0"})
                  for k, t in targets.items()}
        out: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
        for run in range(runs):
            for kind in (KINDS if run % 2 == 0 else KINDS[::-1]):
                topic = kafka.fresh_topic("metrics")
                admins[kind].create_topics(
                    [NewTopic(topic, suite_c.PARTITIONS, 1)])[topic].result(60)
                os.sync()
                stop, scrapes = threading.Event(), [0]
                scraper = None
                if kind == "on":
                    scraper = threading.Thread(target=_scrape, daemon=True, args=(
                        f"http://127.0.0.1:{port}/metrics", stop, scrapes))
                    scraper.start()
                try:
                    rate = suite_c.produce(exe, targets[kind], topic, count, SIZE, "1", False)
                finally:
                    stop.set()
                    if scraper is not None:
                        scraper.join(15)
                admins[kind].delete_topics([topic])[topic].result(60)
                out[kind].append((rate.msg_per_s, rate.cpu_s_per_gb))
                print(f"metrics run {run + 1} {kind:3} produce 1 KiB acks=1: "
                      f"{rate.msg_per_s:,.0f}/s, broker {rate.cpu_s_per_gb:.2f} CPU s/GB"
                      + (f", {scrapes[0]} scrapes" if kind == "on" else ""),
                      file=sys.stderr, flush=True)
        cost = scrape_cost_ms(f"http://127.0.0.1:{port}/metrics", targets["on"].pid)
        print(f"broker CPU per scrape: {cost:.2f} ms", flush=True)
        return out
    finally:
        for b in brokers.values():
            b.stop()


def summary(results: dict[str, list[tuple[float, float]]]) -> str:
    rate = {k: statistics.median(r for r, _ in results[k]) for k in KINDS}
    cpu = {k: statistics.median(c for _, c in results[k]) for k in KINDS}
    return (f"C producer 1 KiB acks=1, median of {len(results['on'])} runs: metrics off "
            f"{rate['off']:,.0f} msg/s {cpu['off']:.2f} CPU s/GB, "
            f"on (scraped every {SCRAPE_EVERY_S:g} s) "
            f"{rate['on']:,.0f} msg/s {cpu['on']:.2f} CPU s/GB; on/off throughput "
            f"{rate['on'] / rate['off']:.3f}, CPU per GB {cpu['on'] / cpu['off']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=300_000, help="records per run")
    args = parser.parse_args(argv)
    print(summary(measure(args.runs, args.count)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

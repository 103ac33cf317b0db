"""``odradek serve --processes N`` (issue 39, "every core of a host"): throughput
with N=2 processes against N=1 on the same machine, in one run.

    python benchmarks/processes_bench.py [--runs 3] [--mb 300] [--partitions 4]
                                         [--json FILE]

Each run starts, for each N in turn (the order alternates from run to run), a
fresh ``odradek serve --processes N`` (tests/support/processes.py: a new data
directory, consecutive ports, every process's metrics endpoint on), and:

1. idle: the processes' CPU over 3 s with nothing to do (heartbeats, the
   metadata log's fetches, timers), as cores, per process;
2. a topic of ``--partitions`` partitions (spread over the processes by the
   controller);
3. produce: the Python confluent-kafka producer flat out (the suite's settings:
   ``linger.ms=5``, ``batch.size=1 MiB``), acks=1, 1 KiB values, ``--mb`` MB,
   round-robin over the partitions; the clock from the first ``produce()``
   until ``flush()`` returns with every record acknowledged;
4. consume: a fresh consumer reading every record back (the suite's settings);
5. the brokers' CPU seconds (every process, user + system) per GB of values
   for each, the Produce and Fetch requests the brokers received (their metrics
   endpoints: ``kafka_network_requestmetrics_requests_total``), RSS per
   process;
6. the same produce and consume of a fifth of the bytes into another topic
   with small requests (``batch.size=16384``, ``linger.ms=0``; fetches of at
   most 16 KiB per partition): two request sizes on the same processes give
   the CPU of one request apart from the CPU of one GB.

Printed: each run's figures, then the medians (min-max) per N and the ratios
N=2/N=1. The client runs on the same cores as the brokers: on a 2-core machine
the producer's own thread takes most of one core, so this shows what the mode
costs where cores are few, not what it gives where they are many; that is
``benchmarks/processes_model.py``'s job, fed with the per-process figures
measured here (``--json`` writes them).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import suite_kafka as kafka
from _common import proc_cpu_seconds, proc_memory_mib
from confluent_kafka.admin import AdminClient

from odradek.broker.observe.endpoint import RENDER_REUSE_S
from tests.support.cluster import wait_for
from tests.support.processes import Supervised, port_block

SIZE = 1024
IDLE_S = 3.0
SMALL_PRODUCER = {"batch.size": 16384, "linger.ms": 0}
SMALL_CONSUMER = {"max.partition.fetch.bytes": 16384, "fetch.max.bytes": 65536,
                  "message.max.bytes": 65536}
_REQUESTS = re.compile(
    r'^kafka_network_requestmetrics_requests_total\{[^}]*request="(\w+)"[^}]*\}\s+(\S+)', re.M)


class Target:
    """suite_kafka's target protocol over a supervisor's processes."""

    name = "odradek --processes"

    def __init__(self, sup: Supervised, metrics_port: int) -> None:
        self.sup = sup
        self.bootstrap = sup.bootstrap
        self.metrics_port = metrics_port
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)

        def led() -> bool | None:
            meta = self.admin.list_topics(topic, timeout=5).topics.get(topic)
            ok = meta is not None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values())
            return ok or None
        wait_for(f"{topic}'s leaders", led, 30)

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic])[topic].result(60)

    def cpu_seconds(self) -> float:
        return sum(proc_cpu_seconds(pid) for pid in self.sup.pids.values())

    def requests(self, api: str) -> float:
        """Requests of ``api`` the processes received so far. Waits out the
        endpoint's reuse of its last rendering first (outside any timed phase)."""
        time.sleep(RENDER_REUSE_S + 0.05)
        total = 0.0
        for i in range(self.sup.processes):
            url = f"http://127.0.0.1:{self.metrics_port + i}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
            total += sum(float(v) for name, v in _REQUESTS.findall(text) if name == api)
        return total

    def rss_mib(self) -> float:
        return statistics.mean(proc_memory_mib(pid)["VmRSS"] for pid in self.sup.pids.values())


@dataclass
class Run:
    n: int
    produce_msg_s: float
    produce_mb_s: float
    produce_cpu_s_per_gb: float
    produce_requests_per_gb: float
    consume_msg_s: float
    consume_mb_s: float
    consume_cpu_s_per_gb: float
    consume_requests_per_gb: float
    idle_cores_per_process: float
    rss_mib_per_process: float
    broker_cores_producing: float
    """Brokers' CPU seconds over wall seconds while producing (all processes)."""
    small_produce_cpu_s_per_gb: float
    small_produce_requests_per_gb: float
    small_consume_cpu_s_per_gb: float
    small_consume_requests_per_gb: float
    """The same with small requests (:data:`SMALL_PRODUCER`, :data:`SMALL_CONSUMER`),
    a fifth of the bytes: with the figures above, the CPU of one request and of
    one GB (processes_model.py)."""


@contextlib.contextmanager
def _settings(settings: dict[str, Any], extra: dict[str, Any]) -> Iterator[None]:
    """suite_kafka's client settings with ``extra`` for the duration."""
    saved = dict(settings)
    settings.update(extra)
    try:
        yield
    finally:
        settings.clear()
        settings.update(saved)


def _produce(target: Target, topic: str, partitions: int, count: int) -> tuple[kafka.Rate, float]:
    """suite_kafka's flat-out produce, and the Produce requests it took."""
    before = target.requests("Produce")
    rate = kafka.produce(target, topic, partitions, count, SIZE, "1", "none")
    return rate, target.requests("Produce") - before


def _consume(target: Target, topic: str, partitions: int, count: int) -> tuple[kafka.Rate, float]:
    before = target.requests("Fetch")
    rate = kafka.consume(target, topic, partitions, count)
    return rate, target.requests("Fetch") - before


def one(n: int, base: Path, mb: int, partitions: int) -> Run:
    port = port_block(3 * n)
    metrics = port + 2 * n
    sup = Supervised(base / f"n{n}-{time.monotonic_ns()}", n, port,
                     [f"odradek.metrics.listener=127.0.0.1:{metrics}"], log_level="WARNING")
    sup.start()
    try:
        target = Target(sup, metrics)
        cpu0 = target.cpu_seconds()
        time.sleep(IDLE_S)  # measuring idle cost: nothing to wait for
        idle = (target.cpu_seconds() - cpu0) / IDLE_S / n
        topic = kafka.fresh_topic("p")
        target.create_topic(topic, partitions)
        count = mb * 1_000_000 // SIZE
        prod, produce_requests = _produce(target, topic, partitions, count)
        cons, fetch_requests = _consume(target, topic, partitions, count)
        small = kafka.fresh_topic("s")
        target.create_topic(small, partitions)
        with _settings(kafka.PRODUCER, SMALL_PRODUCER):
            sprod, sprod_requests = _produce(target, small, partitions, count // 5)
        with _settings(kafka.CONSUMER, SMALL_CONSUMER):
            scons, scons_requests = _consume(target, small, partitions, count // 5)
        gc.collect()  # the producer's client goes before its brokers do (no disconnect noise)
        run = Run(n, prod.msg_per_s, prod.mb_per_s, prod.cpu_s_per_gb,
                  produce_requests / (prod.value_bytes / 1e9),
                  cons.msg_per_s, cons.mb_per_s, cons.cpu_s_per_gb,
                  fetch_requests / (cons.value_bytes / 1e9), idle, target.rss_mib(),
                  prod.server_cpu_s / prod.seconds,
                  sprod.cpu_s_per_gb, sprod_requests / (sprod.value_bytes / 1e9),
                  scons.cpu_s_per_gb, scons_requests / (scons.value_bytes / 1e9))
    except BaseException:
        sup.kill_all()
        raise
    assert sup.stop() == 0, sup.tail()
    return run


def _line(r: Run) -> str:
    return (f"N={r.n}: produce {r.produce_msg_s:9,.0f} msg/s {r.produce_mb_s:6.1f} MB/s "
            f"{r.produce_cpu_s_per_gb:5.2f} CPU s/GB ({r.broker_cores_producing:.2f} cores, "
            f"{r.produce_requests_per_gb:,.0f} req/GB); consume {r.consume_msg_s:9,.0f} msg/s "
            f"{r.consume_cpu_s_per_gb:5.2f} CPU s/GB ({r.consume_requests_per_gb:,.0f} req/GB); "
            f"idle {r.idle_cores_per_process:.4f} cores/process; "
            f"RSS {r.rss_mib_per_process:.0f} MiB/process; small requests: produce "
            f"{r.small_produce_cpu_s_per_gb:.2f} CPU s/GB ({r.small_produce_requests_per_gb:,.0f} "
            f"req/GB), consume {r.small_consume_cpu_s_per_gb:.2f} CPU s/GB "
            f"({r.small_consume_requests_per_gb:,.0f} req/GB)")


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=300, help="MB of values produced per case")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None,
                        help="write every run's figures here (processes_model.py --figures)")
    args = parser.parse_args()
    # a kill stops the processes too (the supervisor's clean-up runs on SystemExit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runs: list[Run] = []
    print(f"{os.cpu_count()} cores; {args.mb} MB of {SIZE} B values, acks=1, "
          f"{args.partitions} partitions, {args.runs} runs", flush=True)
    with tempfile.TemporaryDirectory(prefix="odradek-processes-bench-") as tmp:
        for i in range(args.runs):
            for n in ((1, 2) if i % 2 == 0 else (2, 1)):
                runs.append(one(n, Path(tmp), args.mb, args.partitions))
                print(f"run {i + 1} {_line(runs[-1])}", flush=True)
    by_n = {n: [r for r in runs if r.n == n] for n in (1, 2)}
    print("\nmedians (min-max):")
    for n, rs in by_n.items():
        print(f"N={n}: produce msg/s {_median([r.produce_msg_s for r in rs])}, "
              f"consume msg/s {_median([r.consume_msg_s for r in rs])}, "
              f"produce CPU s/GB {_median([r.produce_cpu_s_per_gb for r in rs])}, "
              f"consume CPU s/GB {_median([r.consume_cpu_s_per_gb for r in rs])}")
    for what in ("produce_msg_s", "consume_msg_s"):
        one_, two_ = (statistics.median(getattr(r, what) for r in by_n[n]) for n in (1, 2))
        print(f"ratio N=2/N=1 {what.removesuffix('_msg_s')}: {two_ / one_:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")


if __name__ == "__main__":
    main()

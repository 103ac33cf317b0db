"""Tail latency under contention (issue 39): a paced producer beside a flat-out one.

    python benchmarks/latency_bench.py [--runs 3] [--rate 10000] [--seconds 10]
        [--size 100] [--pacers sleep,spin] [--override key=value ...]
        [--cluster] [--acks 1|all]

One ``odradek serve`` (a fresh one per run, private data directory; with
``--cluster`` a local 3-node cluster, ``tests/support/cluster.py``, with
topics of RF=3 and ``min.insync.replicas=2``, both producers acks=all unless
``--acks`` says otherwise) and
``c/rdkbench.c`` processes (librdkafka from C, compiled as the suite's C
phase does, see ``suite_c.py``). Each run measures four cases in order, each
on fresh 6-partition topics:

* ``sleep``: the stamped producer paced at ``--rate`` records/s by sleeping
  1 ms between bursts (rdkbench's default pacer);
* ``spin``: the same paced by busy-waiting on ``CLOCK_MONOTONIC`` until each
  record's due time, as ``rdkafka_performance -r`` does: the pacer keeps a
  core busy, so the broker competes with it for the machine's cores;
* ``sleep+load``, ``spin+load``: the same, while a second rdkbench produces
  100 B records flat out (acks=1, ``linger.ms=5``) into another topic; it
  starts 1 s before the measured producer and is stopped (SIGTERM) when the
  measured producer is done.

The measured producer: acks=1 (``--acks``), ``linger.ms=0``, values of ``--size`` bytes
stamped with ``CLOCK_MONOTONIC`` at the produce call; a consumer process
(assigned before the producer starts) records arrival minus stamp. Figures:
p50, p99, p99.9 and max in ms per case, the median over the runs with min
and max; the load's acknowledged records/s (from the load topic's end
offsets over the measured window); and per pacer the ratio contended p99 /
uncontended p99, per run, median of those (the issue's goal: at most 2).

Each case also prints how the broker's event-loop thread spent the case's
wall time (``/proc/PID/task/PID/schedstat``): running, and runnable but
waiting for a CPU (``wait``). Run + wait near the wall time means the loop
had work all along and the latency is a CPU shortfall (the loop's core went
to other threads), not a stall inside the broker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tempfile

import suite_c
from _common import broker_process
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = suite_c.PARTITIONS


@dataclass
class Case:
    pacer: str
    loaded: bool

    @property
    def name(self) -> str:
        return self.pacer + ("+load" if self.loaded else "")


@dataclass
class Sample:
    p50: float
    p99: float
    p999: float
    max: float
    sent_rate: float
    load_rate: float
    run_s: float = 0.0
    """CPU time of the broker's loop thread during the case."""
    wait_s: float = 0.0
    """Time the loop thread was runnable but not running (waiting for a CPU)."""
    wall_s: float = 0.0


def loop_schedstat(pid: int) -> tuple[float, float]:
    """(seconds running, seconds waiting on a runqueue) of ``pid``'s main thread."""
    with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as f:
        run_ns, wait_ns, _ = f.read().split()
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def _end_offsets(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency-bench-offsets",
                  "log_level": 0})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(PARTITIONS))
    finally:
        c.close()


def measure(exe: Path, bootstrap: str, admin: AdminClient, tag: str, case: Case, rate: int,
            seconds: float, size: int, broker_pid: int | None = None, rf: int = 1,
            acks: str = "1") -> Sample:
    """One case on fresh topics: see the module docstring."""
    topic, load_topic = f"lat-{tag}", f"load-{tag}"
    topics = [topic] + ([load_topic] if case.loaded else [])
    config = {"min.insync.replicas": "2"} if rf >= 3 else {}
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, rf, config=config)
                                    for t in topics]).values():
        fut.result(60)
    expect = int(rate * seconds)
    consumer = subprocess.Popen(
        [str(exe), "latency", bootstrap, topic, str(PARTITIONS), str(expect),
         str(seconds + 60)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loader: subprocess.Popen[str] | None = None
    try:
        warm = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
        for p in range(PARTITIONS):
            warm.produce(topic, b"W" * 16, partition=p)
        if warm.flush(30):
            raise RuntimeError("latency warm-up not acknowledged")
        del warm
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError(f"latency consumer: {consumer.communicate()[1]}")
        load_rate = 0.0
        if case.loaded:
            loader = subprocess.Popen(
                [str(exe), "produce", bootstrap, load_topic, str(PARTITIONS), str(10**9),
                 "100", acks, "0", "0", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # the load is at full speed before the clock starts
            if loader.poll() is not None:
                raise RuntimeError(f"load producer exited: {loader.communicate()[1]}")
            before, t_before = _end_offsets(bootstrap, load_topic), time.monotonic()
        sched0, wall0 = loop_schedstat(broker_pid) if broker_pid else (0.0, 0.0), time.monotonic()
        sent = json.loads(subprocess.run(
            [str(exe), "produce", bootstrap, topic, str(PARTITIONS), str(expect), str(size),
             acks, "0", str(rate), "1", case.pacer],
            capture_output=True, text=True, check=True, timeout=seconds + 120,
        ).stdout.strip().splitlines()[-1])
        sched1, wall1 = loop_schedstat(broker_pid) if broker_pid else (0.0, 0.0), time.monotonic()
        if loader is not None:
            after = _end_offsets(bootstrap, load_topic)
            load_rate = (after - before) / (time.monotonic() - t_before)
            loader.send_signal(signal.SIGTERM)
            loader.communicate(timeout=180)
        out, err = consumer.communicate(timeout=seconds + 90)
        last = out.strip().splitlines()[-1] if out.strip() else ""
        if not last.startswith("{"):
            raise RuntimeError(f"latency consumer failed: {err.strip()[-500:]}")
        got = json.loads(last)
        if got["samples"] < expect:  # the rest did not arrive within seconds + 60
            print(f"  ({case.name}: only {got['samples']:,} of {expect:,} records arrived in "
                  f"{seconds + 60:.0f} s; the percentiles are of those)", flush=True)
        return Sample(got["p50_ms"], got["p99_ms"], got["p999_ms"], got["max_ms"],
                      float(sent["rate"]), load_rate, sched1[0] - sched0[0],
                      sched1[1] - sched0[1], wall1 - wall0)
    finally:
        for proc in (consumer, loader):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        admin.delete_topics(topics)


def start_cluster(stack: contextlib.ExitStack, overrides: list[str],
                  env: dict[str, str]) -> str:
    """A formatted, started local 3-node cluster (stopped by ``stack``) with three
    live brokers; its bootstrap address."""
    from tests.support.cluster import LocalCluster, wait_for

    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="odradek-lat-bench-")))
    cluster = LocalCluster(tmp, 3, overrides=dict(o.split("=", 1) for o in overrides))
    if env:
        os.environ.update(env)  # the nodes inherit this process's environment
    cluster.format()
    stack.callback(cluster.stop)
    cluster.start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    wait_for("three live brokers",
             lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, 0.5)
    return str(cluster.bootstrap)


def _fmt(values: Sequence[float], spec: str = ".2f") -> str:
    med = statistics.median(values)
    return f"{med:{spec}} ({min(values):{spec}}-{max(values):{spec}})"


def report(cases: list[Case], results: dict[str, list[Sample]], pacers: list[str]) -> None:
    print("\ncase           p50 ms              p99 ms                p99.9 ms"
          "               max ms                 load rec/s")
    for case in cases:
        got = results[case.name]
        load = _fmt([s.load_rate for s in got], ",.0f") if case.loaded else "-"
        print(f"{case.name:12} {_fmt([s.p50 for s in got]):19} {_fmt([s.p99 for s in got]):21} "
              f"{_fmt([s.p999 for s in got]):22} {_fmt([s.max for s in got]):22} {load}")
    for pacer in pacers:
        alone, loaded = results.get(pacer), results.get(pacer + "+load")
        if alone and loaded:
            ratios = [b.p99 / a.p99 for a, b in zip(alone, loaded, strict=True)]
            print(f"{pacer}: contended p99 / uncontended p99 per run "
                  f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}"
                  f" (goal <= 2)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=100, help="value bytes (at least 9)")
    parser.add_argument("--pacers", default="sleep,spin")
    parser.add_argument("--no-load", action="store_true", help="only the unloaded cases")
    parser.add_argument("--override", action="append", default=[],
                        help="a broker setting key=value (repeatable)")
    parser.add_argument("--env", action="append", default=[],
                        help="an environment variable NAME=value of the broker (repeatable)")
    parser.add_argument("--cluster", action="store_true",
                        help="a local 3-node cluster, topics RF=3, min.insync.replicas=2")
    parser.add_argument("--acks", help="the producers' acks (default: 1, all with --cluster)")
    args = parser.parse_args()
    acks = args.acks or ("all" if args.cluster else "1")
    exe, why = suite_c.build()
    if exe is None:
        print(f"latency_bench: cannot build rdkbench: {why}", file=sys.stderr)
        return 1
    pacers = [p for p in args.pacers.split(",") if p]
    cases = [Case(p, False) for p in pacers]
    if not args.no_load:
        cases += [Case(p, True) for p in pacers]
    print(f"latency_bench: {args.rate} rec/s of {args.size} B for {args.seconds} s, "
          f"{args.runs} runs, {os.cpu_count()} CPUs, librdkafka "
          f"{suite_c.librdkafka_version(exe)}, overrides {args.override or 'none'}, "
          f"{'3-node cluster, RF=3' if args.cluster else 'one node'}, acks={acks}", flush=True)
    results: dict[str, list[Sample]] = {c.name: [] for c in cases}
    t0 = time.perf_counter()
    env = dict(e.split("=", 1) for e in args.env)
    for run in range(args.runs):
        with contextlib.ExitStack() as stack:
            if args.cluster:
                bootstrap, pid, rf = start_cluster(stack, args.override, env), None, 3
            else:
                broker = broker_process(*args.override)
                broker.env.update(env)
                broker.start()
                stack.callback(broker.stop)
                bootstrap, pid, rf = broker.bootstrap, broker.pid, 1
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
            for case in cases:
                subprocess.run(["sync"], check=False)
                s = measure(exe, bootstrap, admin, f"{run}-{case.name.replace('+', '-')}",
                            case, args.rate, args.seconds, args.size, pid, rf, acks)
                results[case.name].append(s)
                print(f"run {run} {case.name:11} p50 {s.p50:.2f} p99 {s.p99:.2f} "
                      f"p99.9 {s.p999:.2f} max {s.max:.1f} ms (sent {s.sent_rate:,.0f}/s"
                      + (f", load {s.load_rate:,.0f}/s)" if case.loaded else ")")
                      + (f"; loop thread ran {s.run_s / s.wall_s:.0%}, waited for a CPU "
                         f"{s.wait_s / s.wall_s:.0%} of {s.wall_s:.1f} s" if pid else ""),
                      flush=True)
    report(cases, results, pacers)
    print(f"\n(took {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark suite: Odradek side by side with its baselines, in one run.

    python -m benchmarks [--quick] [--runs 3] [--out benchmarks/results/NAME]
                         [--skip redis,nats,metadata,...]

Targets: ``odradek serve`` (a subprocess), librdkafka's in-process mock
cluster (the Python client's ceiling), Redis Streams and NATS JetStream (if
``redis-server``/``nats-server`` are installed; otherwise the runner says how
to install them). Phases, in this order (latency first, after ``sync``, so no
earlier bulk write leaves dirty pages for the kernel to throttle):

latency     p50/p99/p99.9 end to end at 1k, 10k and 100k msg/s (100 B, acks=1)
produce     msg/s for 100 B and 1 KiB, acks 1 and all, none and lz4, 1 and 6
            partitions; broker CPU seconds per GB of values ingested
consume     msg/s reading back what was produced (acks=1 topics)
group       three members of one group reading 6 partitions, join included
c           librdkafka from C (c/rdkbench.c, compiled with gcc at run time; skipped
            without librdkafka's headers): produce and consume msg/s and MB/s,
            100 B and 1 KiB, acks=1 and acks=all with idempotence, broker CPU
            per GB; latency at 1k, 10k and 50k msg/s, unloaded and with a
            second producer at half the flat-out rate
tls         the C producer at 1 KiB, acks=1, over an SSL listener and a plaintext one
            of one broker, alternating (tls_bench.py); both rates and their ratio
others      Redis Streams and NATS JetStream produce and consume, 100 B and 1 KiB
startup     spawn to first ApiVersions answer (fresh and existing data dir,
            bytecode cached or compiled) and idle RSS of each broker process
metadata    a full Metadata request with 10,000 partitions (1,000 with --quick)
sasl        connection set-ups per second: PLAIN and SCRAM-SHA-256 against plaintext
            (sasl_bench.py; 300 connections a run, 100 with --quick)
spark       spark_bench.py's batch/stream reads and writes (full runs only)

Every figure is the median of ``--runs`` runs with min-max (``--quick``: one
run of a smaller matrix, under two minutes). Results go to ``--out``:
``results.md`` (the table), ``results.json`` and PNG charts. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
import sasl_bench
import startup_bench
import suite_c
import suite_kafka as kafka
import suite_others as others
import tls_bench
from _common import MockCluster, broker_process


@dataclass(frozen=True)
class Plan:
    runs: int
    sizes: tuple[int, ...]
    acks: tuple[str, ...]
    compressions: tuple[str, ...]
    partitions: tuple[int, ...]
    count: dict[int, int]  # value size -> records per produce run
    window: dict[int, int]  # value size -> records per partition read back
    rates: tuple[int, ...]
    latency_s: float
    group_records: int
    other_count: dict[int, int]
    metadata_partitions: int
    c_count: dict[int, int]  # value size -> records per C-client produce run
    c_rates: tuple[int, ...]  # C-client latency rates (msg/s)
    startup_runs: int


FULL = Plan(3, (100, 1024), ("1", "all"), ("none", "lz4"), (1, 6),
            {100: 400_000, 1024: 100_000}, {100: 36_000, 1024: 4_000},
            (1_000, 10_000, 100_000), 3.0, 180_000, {100: 200_000, 1024: 60_000}, 10_000,
            {100: 3_000_000, 1024: 600_000}, (1_000, 10_000, 50_000), 5)
QUICK = Plan(1, (100, 1024), ("1",), ("none",), (1, 6),
             {100: 150_000, 1024: 40_000}, {100: 36_000, 1024: 4_000},
             (10_000,), 2.0, 60_000, {100: 40_000, 1024: 20_000}, 1_000,
             {100: 1_000_000, 1024: 250_000}, (1_000, 10_000, 50_000), 5)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _size(n: int) -> str:
    return "1 KiB" if n == 1024 else f"{n} B"


@contextlib.contextmanager
def kafka_targets() -> Iterator[list[kafka.Target]]:
    # ODRADEK_BENCH_OVERRIDES: extra broker settings (KEY=VALUE, space separated),
    # to compare a setting against the default in the same conditions.
    extra = os.environ.get("ODRADEK_BENCH_OVERRIDES", "").split()
    broker = broker_process("group.initial.rebalance.delay.ms=0", "num.partitions=1",
                            *extra).start()
    mock = MockCluster().start()
    try:
        yield [kafka.OdradekTarget(broker), kafka.MockTarget(mock)]
    finally:
        mock.stop()
        broker.stop()


def latency_phase(plan: Plan, targets: list[kafka.Target], r: report.Results) -> None:
    for run in range(plan.runs):
        for rate in plan.rates:
            for target in targets[run % 2:] + targets[:run % 2]:
                topic = kafka.fresh_topic("lat")
                target.create_topic(topic, 6)
                os.sync()
                lat = kafka.latency(target, topic, 6, rate, plan.latency_s)
                target.delete_topic(topic)
                for q, v in (("p50", lat.p50_ms), ("p99", lat.p99_ms), ("p99.9", lat.p999_ms)):
                    r.add("End-to-end latency", f"{q} @ {rate // 1000}k msg/s", target.name, v,
                          "ms", higher_is_better=False)
                _log(f"latency {target.name:8} {rate:>6}/s p50 {lat.p50_ms:.2f} ms "
                     f"p99 {lat.p99_ms:.2f} ms (achieved {lat.achieved_rate:.0f}/s)")


def throughput_phase(plan: Plan, targets: list[kafka.Target], r: report.Results) -> None:
    for run in range(plan.runs):
        for size in plan.sizes:
            for comp in plan.compressions:
                for parts in plan.partitions:
                    for acks in plan.acks:
                        for target in targets[run % 2:] + targets[:run % 2]:
                            topic = kafka.fresh_topic("tp")
                            target.create_topic(topic, parts)
                            rate = kafka.produce(target, topic, parts, plan.count[size], size,
                                                 acks, comp)
                            config = f"{_size(size)}, acks={acks}, {comp}, {parts}p"
                            r.add("Produce", config, target.name, rate.msg_per_s, "msg/s")
                            if acks == "1" and comp == "none" and parts == 6:
                                r.add("Broker CPU per GB ingested", f"{_size(size)}, acks=1, 6p",
                                      target.name, rate.cpu_s_per_gb, "CPU s/GB",
                                      higher_is_better=False)
                            if acks == plan.acks[0]:
                                c = kafka.consume(target, topic, parts, plan.window[size])
                                r.add("Consume", f"{_size(size)}, {comp}, {parts}p", target.name,
                                      c.msg_per_s, "msg/s")
                            target.delete_topic(topic)
                            _log(f"run {run + 1} {target.name:8} produce {config}: "
                                 f"{rate.msg_per_s:,.0f}/s")


def group_phase(plan: Plan, targets: list[kafka.Target], r: report.Results) -> None:
    for run in range(plan.runs):
        for target in targets[run % 2:] + targets[:run % 2]:
            topic = kafka.fresh_topic("grp")
            target.create_topic(topic, 6)
            kafka.produce(target, topic, 6, plan.group_records, 100, "1", "none")
            rate = kafka.group_fetch(target, topic, plan.group_records)
            target.delete_topic(topic)
            r.add("Consumer-group fetch", "3 members, 6p, 100 B", target.name, rate.msg_per_s,
                  "msg/s")
            _log(f"group {target.name:8} {rate.msg_per_s:,.0f}/s")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def c_client_phase(plan: Plan, targets: list[kafka.Target], r: report.Results) -> None:
    """suite_c.py: librdkafka from C against each target (see its docstring)."""
    exe, why = suite_c.build()
    if exe is None:
        line = f"C-client phase skipped: {why}"
        r.notes.append(line)
        _log(line)
        return
    flat_out: dict[str, list[float]] = {t.name: [] for t in targets}
    for run in range(plan.runs):
        for size in plan.sizes:
            for acks, idempotent in (("1", False), ("all", True)):
                for target in targets[run % 2:] + targets[:run % 2]:
                    topic = kafka.fresh_topic("c")
                    target.create_topic(topic, suite_c.PARTITIONS)
                    os.sync()  # no dirty pages of an earlier run throttle this one
                    rate = suite_c.produce(exe, target, topic, plan.c_count[size], size, acks,
                                           idempotent)
                    config = f"{_size(size)}, " + (
                        "acks=1" if acks == "1" else "acks=all, idempotent")
                    r.add("C client: produce", config, target.name, rate.msg_per_s, "msg/s")
                    r.add("C client: produce MB/s", config, target.name, rate.mb_per_s, "MB/s")
                    r.add("C client: broker CPU per GB ingested", config, target.name,
                          rate.cpu_s_per_gb, "CPU s/GB", higher_is_better=False)
                    if size == 100 and acks == "1":
                        flat_out[target.name].append(rate.msg_per_s)
                    line = (f"c run {run + 1} {target.name:8} produce {config}: "
                            f"{rate.msg_per_s:,.0f}/s {rate.mb_per_s:.0f} MB/s")
                    if acks == "1":
                        c = suite_c.consume(exe, target, topic, plan.window[size])
                        r.add("C client: consume", _size(size), target.name, c.msg_per_s,
                              "msg/s")
                        r.add("C client: consume MB/s", _size(size), target.name, c.mb_per_s,
                              "MB/s")
                        line += f", consume {c.msg_per_s:,.0f}/s"
                    target.delete_topic(topic)
                    _log(line)
    floors: dict[tuple[int, int], list[float]] = {}
    for _ in range(plan.runs):
        for window in (16 << 20, -1):
            os.sync()
            floors.setdefault((window, 0), []).append(
                suite_c.file_floor(plan.c_count[max(plan.sizes)] * max(plan.sizes), window))
    loads: dict[str, list[float]] = {t.name: [] for t in targets}
    for run in range(plan.runs):
        for loaded in (False, True):
            for rate in plan.c_rates:
                for target in targets[run % 2:] + targets[:run % 2]:
                    topic = kafka.fresh_topic("clat")
                    target.create_topic(topic, suite_c.PARTITIONS)
                    load_topic, load_rate = None, 0
                    if loaded:
                        load_topic = kafka.fresh_topic("cload")
                        target.create_topic(load_topic, suite_c.PARTITIONS)
                        load_rate = int(statistics.median(flat_out[target.name]) / 2)
                    os.sync()
                    lat, achieved = suite_c.latency(exe, target, topic, rate, plan.latency_s,
                                                    load_topic, load_rate)
                    target.delete_topic(topic)
                    if load_topic is not None:
                        target.delete_topic(load_topic)
                        loads[target.name].append(achieved)
                    suffix = " + load at 1/2 flat-out" if loaded else ""
                    for q, v in (("p50", lat.p50_ms), ("p99", lat.p99_ms),
                                 ("p99.9", lat.p999_ms)):
                        r.add("C client: end-to-end latency",
                              f"{q} @ {rate // 1000}k msg/s{suffix}", target.name, v, "ms",
                              higher_is_better=False)
                    _log(f"c latency {target.name:8} {rate:>6}/s{suffix}: p50 {lat.p50_ms:.2f} "
                         f"p99 {lat.p99_ms:.2f} p99.9 {lat.p999_ms:.2f} ms (achieved "
                         f"{lat.achieved_rate:.0f}/s" + (f", load {achieved:,.0f}/s of "
                                                         f"{load_rate:,}/s)" if loaded else ")"))
    for name, values in loads.items():
        if values:
            r.notes.append(f"C-client latency under load, {report.LABEL[name]}: the second "
                           f"producer achieved {statistics.median(values):,.0f} msg/s "
                           f"(median; half of the flat-out 100 B acks=1 rate)")
    r.notes.append(
        "Page-cache floor (what storing the bytes costs any broker here): writing the "
        f"same {plan.c_count[max(plan.sizes)] * max(plan.sizes) / 1e6:,.0f} MB into "
        f"{suite_c.PARTITIONS} fresh files in 1 MiB writes from one thread took "
        f"{_spread(floors[(16 << 20, 0)])} CPU s/GB keeping 16 MiB per file cached (the "
        f"broker's default drop-behind) and {_spread(floors[(-1, 0)])} CPU s/GB leaving the "
        "cache to the kernel (median (min–max) of the runs; the second depends on whether "
        "the kernel has just freed pages to reuse)")
    r.notes.append("C client: c/rdkbench.c on the system librdkafka "
                   f"({suite_c.librdkafka_version(exe)}), one process per producer and consumer, "
                   f"{suite_c.PARTITIONS} partitions; produce runs of "
                   + ", ".join(f"{n:,} x {_size(s)}" for s, n in plan.c_count.items())
                   + "; consume reads the newest "
                   + ", ".join(f"{n:,} x {_size(s)}" for s, n in plan.window.items())
                   + " records per partition.")


def tls_phase(plan: Plan, r: report.Results) -> None:
    """tls_bench.py: the C producer over SSL and plaintext listeners of one broker."""
    try:
        rates = tls_bench.measure(plan.runs, plan.c_count[1024])
    except RuntimeError as exc:
        r.notes.append(str(exc))
        _log(str(exc))
        return
    for kind, values in rates.items():
        for v in values:
            r.add("C client: produce over TLS", f"1 KiB, acks=1, {kind}", "odradek", v, "msg/s")
    line = tls_bench.summary(rates)
    r.notes.append(line)
    _log(line)


def others_phase(plan: Plan, r: report.Results, skip: set[str]) -> None:
    for name, server_class in others.SERVERS.items():
        if name in skip:
            continue
        how = others.missing(name)
        if how:
            r.notes.append(f"{report.LABEL[name]} not measured: not installed ({how})")
            _log(f"{name}: not installed; to include it: {how}")
            continue
        for run in range(plan.runs):
            server = server_class()
            try:
                if run == 0:
                    time.sleep(1)
                    r.add("Start-up time", startup_bench.case_label("fresh", "cached"), name,
                          server.ready_s, "s", higher_is_better=False)
                    r.add("Idle RSS", "after start-up", name, server.rss_mib(), "MiB",
                          higher_is_better=False)
                for size in plan.sizes:
                    stream = f"s{size}"
                    p = server.produce(stream, plan.other_count[size], size)
                    c = server.consume(stream, plan.other_count[size])
                    r.add("Produce", f"{_size(size)}, acks=1, none, 1p", name, p.msg_per_s,
                          "msg/s")
                    r.add("Consume", f"{_size(size)}, none, 1p", name, c.msg_per_s, "msg/s")
                    if size == 1024:
                        r.add("Broker CPU per GB ingested", "1 KiB, acks=1, 6p", name,
                              p.cpu_s_per_gb, "CPU s/GB", higher_is_better=False)
                    _log(f"{name} {_size(size)} produce {p.msg_per_s:,.0f}/s "
                         f"consume {c.msg_per_s:,.0f}/s")
            finally:
                server.stop()


def spark_phase(plan: Plan, r: report.Results) -> None:
    """spark_bench.py's figures: 1M records of 100 B through format("odradek")."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        r.notes.append("Spark not measured: pip install -e '.[spark]' (and Java 17)")
        return
    import tempfile

    import spark_bench

    records, section = 1_000_000, "PySpark format(\"odradek\"), local[2], 1M x 100 B"
    with broker_process() as broker, tempfile.TemporaryDirectory() as work:
        spark_bench.fill(broker.bootstrap, "bench", records)
        got = spark_bench.measure(broker.bootstrap, records, plan.runs, records // 4,
                                  Path(work), log=_log)
    rows = [
        ("batch read -> noop", "batch", "batch parquet"),
        ("stream, 250k per trigger (wall)", "stream limited", None),
        ("stream, 250k per trigger (in batches)", "stream limited in batches", None),
        ("stream, one batch (wall)", "stream one batch", None),
        ("stream, one batch (in batch)", "stream one batch in batches", None),
        ("write -> topic", "write", "write noop"),
        ("stream copy -> topic, exactly-once (wall)", "stream write eos", "stream write"),
        ("stream copy -> topic, exactly-once (in batches)", "stream write eos in batches",
         "stream write in batches"),
    ]
    for config, key, baseline in rows:
        for v in got[key]:
            r.add(section, config, "odradek", v, "rows/s")
        for v in got[baseline] if baseline else []:
            r.add(section, config, "baseline", v, "rows/s")
    r.notes.append("PySpark baseline: the same job on Spark alone (read: the rows from Parquet; "
                   "write: the same DataFrame to noop; exactly-once stream copy: the same "
                   "copy with the at-least-once sink).")


def startup_phase(plan: Plan, r: report.Results) -> None:
    """startup_bench.py: spawn to the first ApiVersions answer, four cases."""
    results, cpu, rss = startup_bench.measure(plan.startup_runs, log=_log)
    for config, values in results.items():
        for v in values:
            r.add("Start-up time", config, "odradek", v, "s", higher_is_better=False)
    for config, values in cpu.items():
        for v in values:
            r.add("Start-up CPU time", config, "odradek", v, "s", higher_is_better=False)
    r.add("Idle RSS", "after start-up", "odradek", rss, "MiB", higher_is_better=False)
    r.notes.append("Start-up: Odradek from spawn to its first ApiVersions answer (median of "
                   f"{plan.startup_runs}; 'CPU time': what the broker process had used by "
                   "then, steadier than wall time on a shared machine) with every module's "
                   "bytecode cached, as after pip "
                   "install, unless the row says 'no .pyc' (odradek's sources compiled at each "
                   "start: an editable install with PYTHONDONTWRITEBYTECODE=1, as this "
                   "repository's tests run); Redis and NATS from spawn to their port accepting.")


def sasl_phase(plan: Plan, quick: bool, r: report.Results) -> None:
    """sasl_bench.py: connection set-ups per second, SASL against plaintext."""
    connections = 100 if quick else 300
    for name, values in sasl_bench.measure(connections, plan.runs).items():
        for v in values:
            r.add("Connection set-ups", sasl_bench.LABELS[name], "odradek", v, "set-ups/s")
    r.notes.append(f"Connection set-ups: {connections} connections one after the other from "
                   "one client process (odradek's client): connect, ApiVersions, then for "
                   "SASL SaslHandshake v1 and SaslAuthenticate, then close (sasl_bench.py).")
    _log("sasl set-ups measured")


def metadata_phase(plan: Plan, targets: list[kafka.Target], r: report.Results) -> None:
    for target in targets:
        created, seconds = kafka.metadata_time(target, plan.metadata_partitions)
        config = f"{plan.metadata_partitions:,} partitions"
        r.add("Metadata request", config, target.name, seconds * 1000, "ms",
              higher_is_better=False)
        r.add("Creating topics", f"{config} in topics of 100", target.name, created, "s",
              higher_is_better=False)
        _log(f"metadata {target.name:8} {seconds * 1000:.1f} ms (created in {created:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run of a small matrix")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    parser.add_argument("--out", type=Path, help="results folder (default "
                        "benchmarks/results/<date>-<full|quick>)")
    parser.add_argument("--skip", default="", help="comma-separated phases or targets: "
                        "latency,produce,group,metadata,c,tls,redis,nats,startup,spark,sasl")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.runs:
        plan = Plan(**{**plan.__dict__, "runs": args.runs})
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    out = args.out or Path(__file__).resolve().parent / "results" / (
        time.strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else "-full"))
    r = report.Results()
    t0 = time.perf_counter()
    with kafka_targets() as targets:
        if "latency" not in skip:
            latency_phase(plan, targets, r)
        if "produce" not in skip:
            throughput_phase(plan, targets, r)
        if "group" not in skip:
            group_phase(plan, targets, r)
        if "metadata" not in skip:
            metadata_phase(plan, targets, r)
        if "c" not in skip:
            c_client_phase(plan, targets, r)
    if "tls" not in skip:
        tls_phase(plan, r)
    others_phase(plan, r, skip)
    if "spark" not in skip and not args.quick:
        spark_phase(plan, r)
    if "startup" not in skip:
        startup_phase(plan, r)
    if "sasl" not in skip:
        sasl_phase(plan, args.quick, r)
    elapsed = time.perf_counter() - t0
    header = (f"## Benchmark results ({'quick' if args.quick else 'full'} run, "
              f"{time.strftime('%Y-%m-%d %H:%M')})\n\n"
              f"{plan.runs} run(s) per figure: median (min–max). {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, {platform.platform()}; suite took "
              f"{elapsed:.0f} s. Python confluent-kafka client on every Kafka target; "
              "Redis and NATS use redis-py+hiredis and nats-py, one stream each, reported "
              "on the 1-partition rows.")
    print(report.write(r, out, header))
    _log(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

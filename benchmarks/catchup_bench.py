"""Catch-up reads (issue 39): a consumer reading a 1 GB backlog of one partition
from its start, with adaptive drop-behind (the default) against drop-behind off
(``odradek.log.page.cache.window.bytes=-1``: the page cache is the kernel's, as
in Kafka), alternating in one run; the adaptive figure over the off one is the
ratio (goal: at least 0.95). ``--fixed`` adds the fixed 16 MiB window of
before issue 39 (``odradek.log.page.cache.retain.bytes=0``) as a third case.

    python benchmarks/catchup_bench.py [--runs 3] [--size 1024] [--mb 1000] [--fixed]

Each run: a fresh ``odradek serve`` per case (its own data directory), one
topic of one partition each; ``--mb`` MB of ``--size``-byte values produced
into each in turn with the Python confluent-kafka client (the suite's
settings, acks=1); ``sync`` (so no write-back competes with the reads on the
shared cores; pages stay cached); then, case after case, the share of the
partition's log pages still in the page cache (``mincore`` every MiB) and a
fresh consumer reading every record from offset 0 (clock from ``assign()`` to
the last record). The reads of one run follow each other within seconds, so
the load of a shared machine weighs on them alike; the order rotates.
Printed: each case's consume msg/s and MB/s, produce msg/s, the broker's CPU
seconds per GB read and written, the cached share, and the medians with min
and max. ``ODRADEK_BENCH_OVERRIDES`` adds settings to every case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite_kafka as kafka
from _common import broker_process

from tests.support.pagecache import resident

CASES: dict[str, tuple[str, ...]] = {
    "adaptive": (),
    "off": ("odradek.log.page.cache.window.bytes=-1",),
    "fixed": ("odradek.log.page.cache.retain.bytes=0",),
}
MiB = 1 << 20


def cached_share(partition_dir: Path) -> float:
    """Share of 1 MiB probes over the partition's segment files that are cached."""
    probes = hits = 0
    for seg in sorted(partition_dir.glob("*.log")):
        for offset in range(0, seg.stat().st_size, MiB):
            probes += 1
            hits += resident(seg, offset)
    return hits / probes if probes else 0.0


class _Case:
    """One case's broker, its filled topic and what it measured."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.broker = broker_process(*CASES[name],
                                     *os.environ.get("ODRADEK_BENCH_OVERRIDES", "").split())
        self.broker.start()
        self.target: kafka.OdradekTarget | None = kafka.OdradekTarget(self.broker)
        self.topic = kafka.fresh_topic("catchup")
        self.target.create_topic(self.topic, 1)
        self.row: dict[str, float] = {}

    def fill(self, count: int, size: int) -> None:
        assert self.target is not None
        produced = kafka.produce(self.target, self.topic, 1, count, size, "1", "none")
        self.row["produce_msg_s"] = produced.msg_per_s
        self.row["broker_cpu_s_per_gb_written"] = produced.cpu_s_per_gb

    def read(self, count: int) -> None:
        assert self.target is not None
        self.row["cached"] = cached_share(self.broker.data_dir / f"{self.topic}-0")
        got = kafka.consume(self.target, self.topic, 1, count)
        if got.messages != count:
            raise RuntimeError(f"{self.name}: read {got.messages} of {count}")
        self.row.update(consume_msg_s=got.msg_per_s, consume_mb_s=got.mb_per_s,
                        broker_cpu_s_per_gb_read=got.cpu_s_per_gb)

    def stop(self) -> None:
        self.target = None  # its admin client, before the broker it would reconnect to goes
        self.broker.stop()


Results = dict[str, list[dict[str, float]]]
"""Each case's runs: consume and produce rates, the cached share, in run order."""


def measure(runs: int, count: int, size: int, cases: list[str]) -> Results:
    """Per run: a fresh broker per case, each filled in turn, ``sync``, then each
    read in turn (so the reads the ratio compares run within seconds of each
    other); who goes first rotates from run to run."""
    out: Results = {case: [] for case in cases}
    for run in range(runs):
        order = cases[run % len(cases):] + cases[:run % len(cases)]
        started: list[_Case] = []
        try:
            for name in order:
                started.append(_Case(name))
            for case in started:
                case.fill(count, size)
            os.sync()
            for case in started:
                case.read(count)
        finally:
            for case in started:
                case.stop()
        for case in started:
            got = case.row
            out[case.name].append(got)
            print(f"catchup run {run + 1} {case.name:8} consume {got['consume_msg_s']:,.0f}/s "
                  f"{got['consume_mb_s']:.0f} MB/s (broker {got['broker_cpu_s_per_gb_read']:.2f}"
                  f" CPU s/GB), cached before the read {got['cached']:.0%}, produce "
                  f"{got['produce_msg_s']:,.0f}/s (broker "
                  f"{got['broker_cpu_s_per_gb_written']:.2f} CPU s/GB)", file=sys.stderr,
                  flush=True)
    return out


def _spread(values: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"[{format(min(values), fmt)}-{format(max(values), fmt)}]")


def summary(results: Results, count: int, size: int) -> str:
    lines = [f"catch-up read of {count:,} x {size} B ({count * size / 1e6:,.0f} MB) from "
             f"offset 0 of one partition, median [min-max] of {len(results['off'])} runs:"]
    for case, rows in results.items():
        lines.append(
            f"  {case:8} consume msg/s {_spread([r['consume_msg_s'] for r in rows], ',.0f')}"
            f"  MB/s {_spread([r['consume_mb_s'] for r in rows], '.0f')}"
            f"  cached {_spread([r['cached'] for r in rows], '.0%')}"
            f"  produce msg/s {_spread([r['produce_msg_s'] for r in rows], ',.0f')}"
            f"  broker CPU s/GB read "
            f"{_spread([r['broker_cpu_s_per_gb_read'] for r in rows], '.2f')}"
            f" written {_spread([r['broker_cpu_s_per_gb_written'] for r in rows], '.2f')}")
    off = statistics.median(r["consume_msg_s"] for r in results["off"])
    for case, rows in results.items():
        if case != "off":
            mine = statistics.median(r["consume_msg_s"] for r in rows)
            pairs = [r["consume_msg_s"] / o["consume_msg_s"]
                     for r, o in zip(rows, results["off"], strict=True)]
            lines.append(f"  {case}/off consume: {mine / off:.2f} (of the medians); "
                         f"per run {_spread(pairs, '.2f')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024, help="value bytes")
    parser.add_argument("--mb", type=int, default=1000, help="backlog, 10^6 bytes of values")
    parser.add_argument("--fixed", action="store_true", help="add the fixed 16 MiB window")
    args = parser.parse_args(argv)
    count = args.mb * 1_000_000 // args.size
    cases = ["adaptive", "off", *(["fixed"] if args.fixed else [])]
    print(summary(measure(args.runs, count, args.size, cases), count, args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A model of ``odradek serve --processes N`` on hosts with more cores than the
2 of the machines the project is measured on (issue 39).

    python benchmarks/processes_model.py [--figures FILE] [--cores 16]

Inputs are figures measured by ``benchmarks/processes_bench.py`` (``--json
FILE``; without ``--figures`` the medians of the run quoted in
docs/decisions.md, :data:`MEASURED`):

* at N=1, the brokers' CPU seconds per GB of values produced (consumed) and
  the Produce (Fetch) requests per GB they received, with the suite's large
  requests (``c_big``, ``q_big``) and with small ones (``c_small``,
  ``q_small``); two request sizes on the same process separate the CPU of one
  request, ``r = (c_small - c_big) / (q_small - q_big)``, from the CPU of one
  GB, ``c0 = c_big - r q_big``;
* the requests per GB with large requests at N=1 and N=2 (``q(1)``,
  ``q(2)``): how much a client's requests split when its partitions are led
  by more processes;
* each process's CPU with nothing to do, in cores, at N=1 and N=2 (``h(1)``,
  ``h(2)``: heartbeats, its metadata fetches, the controllers' work for each
  broker, timers);
* RSS per process.

Then, for N processes on a host of C cores:

* requests per GB grow linearly with N, by the measured step:
  ``q(N) = q(1) + (q(2) - q(1)) (N - 1)``;
* the idle cost per process grows linearly with its peers:
  ``h(N) = h(1) + max(0, h(2) - h(1)) (N - 1)``;
* each process does useful work on at most one core (its event loop; the GIL),
  and N processes share C cores: ``cores(N) = min(N, C) - N h(N)``;
* throughput ``T(N) = cores(N) / (c0 + r q(N))`` GB/s, produce and consume
  each alone.

Assumptions (each makes the prediction an upper bound): the clients run on
other hosts; partitions >= N with leaders spread evenly and load spread evenly
over them; replication factor 1 (no copies between processes); disk, network
and memory bandwidth are not the limit (compare the GB/s with the host's NIC:
10 GbE is 1.25 GB/s); cores are independent (no SMT siblings, no frequency
drop with load); the per-request and per-byte costs are those of the 2-core VM.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

#: Medians of ``processes_bench.py --runs 5 --mb 300`` (docs/decisions.md).
MEASURED: dict[str, float] = {
    "produce_cpu_s_per_gb_1": 0.9, "small_produce_cpu_s_per_gb_1": 7.33,
    "produce_requests_per_gb_1": 1437.0, "produce_requests_per_gb_2": 1820.0,
    "small_produce_requests_per_gb_1": 65600.0,
    "consume_cpu_s_per_gb_1": 0.433, "small_consume_cpu_s_per_gb_1": 6.0,
    "consume_requests_per_gb_1": 350.0, "consume_requests_per_gb_2": 703.0,
    "small_consume_requests_per_gb_1": 16330.0,
    "idle_cores_per_process_1": 0.00333, "idle_cores_per_process_2": 0.00333,
    "rss_mib_per_process": 55.0,
}

_KEYS = ("produce_cpu_s_per_gb", "produce_requests_per_gb", "consume_cpu_s_per_gb",
         "consume_requests_per_gb", "idle_cores_per_process", "small_produce_cpu_s_per_gb",
         "small_produce_requests_per_gb", "small_consume_cpu_s_per_gb",
         "small_consume_requests_per_gb")


def from_runs(path: Path) -> dict[str, float]:
    """The medians per N of a ``processes_bench.py --json`` file."""
    runs = json.loads(path.read_text())
    out: dict[str, float] = {}
    for key in _KEYS:
        for n in (1, 2):
            out[f"{key}_{n}"] = statistics.median(r[key] for r in runs if r["n"] == n)
    out["rss_mib_per_process"] = statistics.median(r["rss_mib_per_process"] for r in runs)
    return out


@dataclass(frozen=True)
class Cost:
    """One direction (produce or consume) at N=1: CPU and requests per GB with
    large and small requests; requests per GB at N=2 with large ones."""

    c_big: float
    q_big: float
    c_small: float
    q_small: float
    q2: float

    @classmethod
    def of(cls, f: dict[str, float], what: str) -> Cost:
        return cls(f[f"{what}_cpu_s_per_gb_1"], f[f"{what}_requests_per_gb_1"],
                   f[f"small_{what}_cpu_s_per_gb_1"], f[f"small_{what}_requests_per_gb_1"],
                   f[f"{what}_requests_per_gb_2"])

    @property
    def per_request(self) -> float:
        if self.q_small <= self.q_big:
            return 0.0
        return max(0.0, (self.c_small - self.c_big) / (self.q_small - self.q_big))

    @property
    def per_gb(self) -> float:
        return max(0.0, self.c_big - self.per_request * self.q_big)

    def requests(self, n: int) -> float:
        return self.q_big + (self.q2 - self.q_big) * (n - 1)

    def cpu_s_per_gb(self, n: int) -> float:
        return self.per_gb + self.per_request * self.requests(n)


def idle(f: dict[str, float], n: int) -> float:
    h1, h2 = f["idle_cores_per_process_1"], f["idle_cores_per_process_2"]
    return h1 + max(0.0, h2 - h1) * (n - 1)


def throughput(cost: Cost, f: dict[str, float], n: int, cores: int) -> float:
    """GB/s of values that N processes on ``cores`` cores can take."""
    useful = min(n, cores) - n * idle(f, n)
    return max(0.0, useful) / cost.cpu_s_per_gb(n)


def table(f: dict[str, float], cores: int, ns: list[int]) -> str:
    produce, consume = Cost.of(f, "produce"), Cost.of(f, "consume")
    lines = [
        f"per request: produce {produce.per_request * 1e6:.0f} µs, consume "
        f"{consume.per_request * 1e6:.0f} µs; per GB: produce {produce.per_gb:.2f} s, "
        f"consume {consume.per_gb:.2f} s; idle per process {idle(f, 1):.4f} cores "
        f"+ {idle(f, 2) - idle(f, 1):.4f} per peer",
        "",
        f"| N processes ({cores} cores) | produce GB/s | × N=1 | consume GB/s | × N=1 "
        f"| idle cores (all) | RSS (all) | connections per client |",
        "|---|---|---|---|---|---|---|---|",
    ]
    p1, c1 = throughput(produce, f, 1, cores), throughput(consume, f, 1, cores)
    for n in ns:
        p, c = throughput(produce, f, n, cores), throughput(consume, f, n, cores)
        lines.append(
            f"| {n} | {p:.2f} | {p / p1:.1f} | {c:.2f} | {c / c1:.1f} | {n * idle(f, n):.2f} "
            f"| {n * f['rss_mib_per_process'] / 1024:.1f} GiB | {n} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figures", type=Path, default=None,
                        help="a processes_bench.py --json file (default: MEASURED)")
    parser.add_argument("--cores", type=int, default=16)
    args = parser.parse_args()
    figures = from_runs(args.figures) if args.figures else MEASURED
    ns = sorted({1, 2, 4, 8, 12, 16, args.cores} | {n for n in (24, 32) if n <= 2 * args.cores})
    print(table(figures, args.cores, ns))


if __name__ == "__main__":
    main()

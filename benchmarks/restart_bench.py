"""Restart time at one partition count: how long a clean restart takes to serve.

    python benchmarks/restart_bench.py --partitions 30000 --data /dev/shm/odr30k [--runs 3]

Builds ``--data`` on first use (one ``odradek serve`` there; topics of 100
partitions, created ten per CreateTopics request by confluent-kafka's
AdminClient, as ``partition_scale_bench.py`` does), stops it with SIGTERM (a
clean stop), then starts it ``--runs`` times on that data, each time timing
from spawning to the first full Metadata answer naming every partition with a
leader, and stopping it cleanly again. Prints each run's seconds, the median,
the broker's RSS once serving, its CPU seconds to that point, and how long
the clean stop took (SIGTERM to exit: it writes the clean-shutdown summary
the next start reads, ``storage/summary.py``). The data
directory is kept (delete it yourself), so runs on the same data compare
builds of the code. On tmpfs (``/dev/shm``) fsyncs are free and building is
quick; on a disk the page cache is warm after the first run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import ServerProcess, proc_cpu_seconds, proc_memory_mib
from partition_scale_bench import PARTITIONS_PER_TOPIC, create, wait_serving


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=30_000)
    parser.add_argument("--data", type=Path, required=True, help="kept data directory")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    server = ServerProcess(args.data, stderr_to_file=True)
    if not args.data.exists() or not any(args.data.iterdir()):
        t0 = time.perf_counter()
        server.start(timeout_s=600)
        create(server.bootstrap, 0, args.partitions // PARTITIONS_PER_TOPIC, 1)
        wait_serving(lambda: [server.bootstrap], args.partitions, time.perf_counter() + 600)
        server.stop(term_timeout_s=600)
        print(f"built {args.partitions} partitions in {time.perf_counter() - t0:.1f} s",
              flush=True)
    times: list[float] = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        server.start(timeout_s=600)
        wait_serving(lambda: [server.bootstrap], args.partitions, time.perf_counter() + 600)
        took = time.perf_counter() - t0
        times.append(took)
        rss = proc_memory_mib(server.pid)["VmRSS"]
        cpu = proc_cpu_seconds(server.pid)
        t1 = time.perf_counter()
        server.stop(term_timeout_s=600)
        stopped = time.perf_counter() - t1
        print(f"restart {took:.2f} s (CPU {cpu:.2f} s, RSS {rss:.0f} MiB, "
              f"{rss * 1024 / args.partitions:.1f} KiB/partition); clean stop {stopped:.2f} s",
              flush=True)
    print(f"median restart at {args.partitions}: {statistics.median(times):.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

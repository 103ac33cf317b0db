"""RF=3 acks=all, run after run: does a producer ever stall?

    python benchmarks/replication_stall_bench.py [--runs 50] [--records 100000]
        [--size 1024] [--stall-ms 2000] [--clusters 5] [--logs DIR]

Issue 39 saw one RF=3 acks=all run in eleven stall for 30 s before it
finished (Kafka never did). This repeats that run ``--runs`` times, spread
over ``--clusters`` fresh 3-node combined KRaft clusters
(``replication_bench.running_cluster``), so a cluster's first minutes are
measured too. Each run: a fresh topic (1 partition, RF=3,
``min.insync.replicas=2``) led by a broker that is not the active
controller; ``--records`` values of ``--size`` bytes produced flat out by
confluent-kafka (acks=all, the suite's producer settings), every delivery
time noted. Per run: the slowest gap between two consecutive
acknowledgements (a stall shows there, wherever it happens), the run's
records/s, and the ISR at the end. A gap over ``--stall-ms`` is a stall: the
script lists those runs and exits 1.

Baseline: the median gap of the same runs (``slowest / median``), so a
noisy machine reads as noise, not as a stall.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replication_bench import (
    MIN_ISR,
    _admin,
    _log,
    controller_of,
    create_topic,
    partitions_of,
    produce_flat_gaps,
    running_cluster,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--stall-ms", type=float, default=2000.0)
    parser.add_argument("--clusters", type=int, default=5,
                        help="fresh clusters the runs are spread over")
    parser.add_argument("--logs", type=Path, help="copy every node's log here")
    args = parser.parse_args()
    gaps: list[float] = []
    rates: list[float] = []
    stalls: list[str] = []
    per_cluster = -(-args.runs // args.clusters)
    run = 0
    for c in range(args.clusters):
        with running_cluster(f"stall-{c + 1}", {}, args.logs) as cluster:
            admin = _admin(cluster)
            controller = controller_of(cluster)
            for _ in range(min(per_cluster, args.runs - run)):
                run += 1
                topic, parts = f"stall-{run}", {}
                while not parts or parts[0][0] == controller:  # a leader not the controller
                    topic += "x" if parts else ""
                    parts = create_topic(admin, topic, 1, 3, MIN_ISR)
                leader = parts[0][0]
                rate, gap_ms, at = produce_flat_gaps(cluster, topic, 0, args.records, args.size)
                isr = sorted(partitions_of(admin, topic)[0][2])
                gaps.append(gap_ms)
                rates.append(rate)
                line = (f"cluster {c + 1} run {run:>2}: {rate:>9,.0f} records/s, slowest ack "
                        f"gap {gap_ms:>8.1f} ms (before record {at:,}), leader {leader}, "
                        f"ISR {isr}")
                print(line, flush=True)
                if gap_ms > args.stall_ms:
                    stalls.append(line)
                    _log(f"STALL in run {run}")
    print(f"\n{args.runs} runs of RF=3 acks=all {args.size} B x {args.records:,}: slowest ack "
          f"gap median {statistics.median(gaps):.1f} ms, max {max(gaps):.1f} ms "
          f"(max / median {max(gaps) / statistics.median(gaps):.1f}x); records/s median "
          f"{statistics.median(rates):,.0f}; stalls over {args.stall_ms:.0f} ms: {len(stalls)}")
    for line in stalls:
        print(f"  {line}")
    return 1 if stalls else 0


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    _log(f"done in {time.monotonic() - started:.0f} s")
    sys.exit(code)

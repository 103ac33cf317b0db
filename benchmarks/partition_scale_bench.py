"""Partition-count scaling: does a partition cost the same at 10k (or 100k) as at 1k?

    python benchmarks/partition_scale_bench.py [--max 10000] [--sizes 1000,10000,30000]
                                               [--cluster | --cluster-only] [--rf 1]

One broker (``odradek serve``, the integration tests' subprocess helper) or,
with ``--cluster``, three combined nodes (``odradek.testing.cluster.LocalCluster``)
get topics of 100 partitions, created ten topics per CreateTopics request by
confluent-kafka's AdminClient, until 1,000 partitions exist, then 10,000, then
(``--max 100000``, long on a 2-core machine) 100,000. At each size:

- **created/s**: partitions created per second over the last step (from the
  size before to this one), request sent to every topic's answer received;
- **CPU ms/part**: the brokers' CPU time (user + system, ``/proc/PID/stat``)
  over that step per partition created: unlike the rate, it does not count
  waiting for the disk (each new partition's directory, files and leader-epoch
  checkpoint are fsynced), so it shows work growing with the count even on a
  machine whose fsyncs are slow or shared;
- **RSS/partition**: the brokers' summed VmRSS (``/proc/PID/status``) divided by
  the partition replicas they hold, and the marginal figure: the growth of
  RSS since the empty broker divided by the replicas added;
- **Metadata**: the median of 5 full Metadata requests (v1, every topic) on one
  connection, from sending to the whole answer read;
- **restart**: SIGTERM to every node (a clean stop), start again on the same
  data, and time from spawning to the first full Metadata answer that names
  every partition with a leader (from every node, in a cluster).

The ratios printed at the end are the creation rate at the largest size over
the rate at 1,000 partitions, and the same for the CPU time per partition
(inverted, so both read "1.0: no growth"); the goal (issue 39) is
>= 1/1.5 = 0.67: creating a partition costs the same however many exist.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import ServerProcess, proc_cpu_seconds, proc_memory_mib

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
GOAL_RATIO = 1 / 1.5


# ---------------------------------------------------------------- a raw Metadata request


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("closed before the answer was complete")
        out += chunk
    return bytes(out)


def metadata_all(sock: socket.socket) -> tuple[int, int]:
    """One Metadata v1 request for every topic (null topics) on ``sock``; returns
    (partitions named, partitions among them with a leader)."""
    request = struct.pack(">hhih", 3, 1, 11, 5) + b"scale" + struct.pack(">i", -1)
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    body = memoryview(_recv_exactly(sock, size))
    pos = 4  # correlation id
    (brokers,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(brokers):
        pos += 4  # node id
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + n + 4  # host, port
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + max(n, 0)  # rack
    pos += 4  # controller id
    (topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    named = led = 0
    for _ in range(topics):
        pos += 2  # error code
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + n + 1  # name, is_internal
        (parts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(parts):
            _err, _index, leader = struct.unpack_from(">hii", body, pos)
            pos += 10
            named += 1
            led += leader >= 0
            for _ in range(2):  # replicas, isr
                (n,) = struct.unpack_from(">i", body, pos)
                pos += 4 + 4 * n
    return named, led


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def metadata_latency_ms(bootstrap: str, runs: int = 5) -> float:
    """The median time of ``runs`` full Metadata requests on one connection."""
    with socket.create_connection(_address(bootstrap), 30) as sock:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            metadata_all(sock)
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def wait_serving(bootstraps: Callable[[], list[str]], expected: int, deadline: float) -> None:
    """Until every address answers a full Metadata naming ``expected`` partitions
    (with leaders). One address is asked at a time, every 20 ms, and the next
    only once it has answered in full: a full Metadata at 100k partitions costs
    its broker ~0.15 s of CPU, and asking all of them every 20 ms made the
    measurement a load of its own on a restart that is short of CPU. The time
    it reports is when the last one was seen whole (nodes fill in together, so
    this adds at most a poll per node)."""
    done: set[str] = set()
    pending: list[str] = []
    while True:
        try:
            addresses = bootstraps()
            pending = [a for a in addresses if a not in done]
            if addresses and not pending:
                return
            if metadata_answer(pending[0]) == (expected, expected):
                done.add(pending[0])
                continue
        except (OSError, struct.error):
            pass
        if time.perf_counter() > deadline:
            raise RuntimeError(f"not serving {expected} partitions in time ({pending})")
        time.sleep(0.02)


def metadata_answer(address: str) -> tuple[int, int]:
    with socket.create_connection(_address(address), 5) as sock:
        sock.settimeout(60)
        return metadata_all(sock)


# ----------------------------------------------------------------------- the targets


class Single:
    """One ``odradek serve`` on a kept data directory."""

    name = "1 node"

    def __init__(self, root: Path) -> None:
        self.server = ServerProcess(root / "data", stderr_to_file=True)

    def start(self) -> None:
        self.server.start(timeout_s=600)

    def stop(self) -> None:
        self.server.stop(term_timeout_s=600)

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def addresses(self) -> list[str]:
        return [self.server.bootstrap] if self.server.bootstrap else []

    def pids(self) -> list[int]:
        return [self.server.pid]


class Cluster:
    """Three combined nodes (broker and controller each)."""

    name = "3 nodes"

    def __init__(self, root: Path) -> None:
        from odradek.testing.cluster import LocalCluster

        self.cluster = LocalCluster(root, 3)
        self.cluster.format()

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop_all(clean=True)

    @property
    def bootstrap(self) -> str:
        return str(self.cluster.bootstrap)

    def addresses(self) -> list[str]:
        return [n.address for n in self.cluster.brokers]

    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.cluster.nodes.values() if n.proc is not None]

    def close(self) -> None:
        self.cluster.stop()


def rss_mib(target: Single | Cluster) -> float:
    return sum(proc_memory_mib(pid)["VmRSS"] for pid in target.pids())


def cpu_s(target: Single | Cluster) -> float:
    return sum(proc_cpu_seconds(pid) for pid in target.pids())


def create(bootstrap: str, first: int, count: int, rf: int) -> None:
    """Topics ``scale-<first>`` .. of 100 partitions each, ten per request."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    for start in range(first, first + count, TOPICS_PER_REQUEST):
        batch = [NewTopic(f"scale-{i}", PARTITIONS_PER_TOPIC, rf)
                 for i in range(start, min(start + TOPICS_PER_REQUEST, first + count))]
        for future in admin.create_topics(batch, operation_timeout=300,
                                          request_timeout=300).values():
            future.result(600)


def run(target: Single | Cluster, sizes: list[int], rf: int
        ) -> tuple[dict[int, float], dict[int, float]]:
    """Every size in turn; prints a row per size; returns ({size: created/s},
    {size: CPU ms per partition created})."""
    target.start()
    wait_serving(target.addresses, 0, time.perf_counter() + 120)
    empty_rss = rss_mib(target)
    rates: dict[int, float] = {}
    cpu: dict[int, float] = {}
    topics = 0
    print(f"{target.name}, RF={rf}: empty broker(s) {empty_rss:.0f} MiB RSS", flush=True)
    print(f"{'partitions':>10} {'created/s':>10} {'CPU ms/part':>12} {'KiB/part':>9} "
          f"{'marginal':>9} {'Metadata ms':>12} {'restart s':>10}", flush=True)
    try:
        for size in sizes:
            wanted = size // PARTITIONS_PER_TOPIC - topics
            t0, used = time.perf_counter(), cpu_s(target)
            create(target.bootstrap, topics, wanted, rf)
            elapsed = time.perf_counter() - t0
            topics += wanted
            rates[size] = wanted * PARTITIONS_PER_TOPIC / elapsed
            cpu[size] = (cpu_s(target) - used) * 1000 / (wanted * PARTITIONS_PER_TOPIC)
            wait_serving(target.addresses, size, time.perf_counter() + 300)
            rss = rss_mib(target)
            replicas = size * rf
            per = rss * 1024 / replicas
            marginal = (rss - empty_rss) * 1024 / replicas
            latency = metadata_latency_ms(target.addresses()[0])
            target.stop()
            t0 = time.perf_counter()
            target.start()
            wait_serving(target.addresses, size, time.perf_counter() + 600)
            restart = time.perf_counter() - t0
            print(f"{size:>10} {rates[size]:>10.0f} {cpu[size]:>12.2f} {per:>9.1f} "
                  f"{marginal:>9.1f} {latency:>12.1f} {restart:>10.2f}", flush=True)
    finally:
        target.stop()
        if isinstance(target, Cluster):
            target.close()
    return rates, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=10_000,
                        help="the largest size: 10000 (default) or 100000")
    parser.add_argument("--cluster", action="store_true", help="also a 3-node cluster")
    parser.add_argument("--rf", type=int, default=1, help="replication factor in the cluster")
    parser.add_argument("--cluster-only", action="store_true",
                        help="the 3-node cluster alone (no single-broker phase)")
    parser.add_argument("--sizes", default="",
                        help="comma-separated sizes instead of 1000,10000,100000 up to --max "
                             "(e.g. 1000,10000,30000); the first is the ratios' base")
    args = parser.parse_args()
    if args.sizes:
        sizes = sorted(int(s) for s in args.sizes.split(","))
    else:
        sizes = [s for s in (1_000, 10_000, 100_000) if s <= args.max]
    kinds: list[tuple[type[Single] | type[Cluster], int]] = (
        [] if args.cluster_only else [(Single, 1)])
    if args.cluster or args.cluster_only:
        kinds.append((Cluster, args.rf))
    for kind, rf in kinds:
        with tempfile.TemporaryDirectory(prefix="odradek-pscale-") as tmp:
            rates, cpu = run(kind(Path(tmp)), sizes, rf)
        largest = sizes[-1]
        first = sizes[0]
        for what, ratio in (("created/s", rates[largest] / rates[first]),
                            ("CPU per partition (inverted)", cpu[first] / cpu[largest])):
            print(f"{kind.name}: {what} at {largest} / at {first} = {ratio:.2f} (goal >= "
                  f"{GOAL_RATIO:.2f}: {'met' if ratio >= GOAL_RATIO else 'NOT met'})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

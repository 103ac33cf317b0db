"""A throttled partition move: does the copy keep to ``--throttle``, and do clients notice?

    python benchmarks/reassign_bench.py [--megabytes 64] [--rate 4000000]
        [--window-num 2] [--big] [--logs DIR]

``--big`` is the issue's must-show at full size: 1024 MB moved at 10 MB/s
(about two minutes of copying, plus the fill; ~3 GB of disk).

A 3-node combined KRaft cluster (``tests/support/cluster.py``) with its
metrics endpoints. One partition (RF=1, on broker 1) is filled with
``--megabytes`` of 10 kB records; a second topic (RF=3 on brokers 1, 3, 2)
carries a paced acks=all producer (one 1 kB record every 20 ms) and a consumer
(in a process of its own),
started 5 s before the move so their unloaded latency is the baseline. Then
``odradek reassign --execute --throttle RATE`` moves the partition to broker 3,
and broker 3's ``kafka_log_log_size`` for it is scraped every 0.25 s until it
holds everything. Reported: the achieved copy rate, the worst 3 s window after
the first second as a multiple of the throttle, the acks=all latency p50/p99 in the 3 s
before the move and during it, client errors, and the time ``--verify`` took to
see completion and clear the throttles. ``replication.quota.window.num`` is
``--window-num`` (Kafka's default 11 lets 10 s of the rate through at once;
docs/operations.md, "Moving partitions").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._common import percentile
from tests.support.cluster import LocalCluster, wait_for


def _size(c: LocalCluster, node: int, topic: str) -> int:
    with urllib.request.urlopen(c.metrics_url(node), timeout=10) as resp:
        text = resp.read().decode()
    key = f'kafka_log_log_size{{topic="{topic}",partition="0"}} '
    return next((int(float(line.split()[-1])) for line in text.splitlines()
                 if line.startswith(key)), -1)


def _create(c: LocalCluster, name: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1,
                                  replica_assignment=[replicas])])[name].result(30)


def _fill(c: LocalCluster, topic: str, megabytes: int) -> float:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20,
                  "batch.size": 262144, "queue.buffering.max.kbytes": 65536})
    started = time.monotonic()
    for _ in range(megabytes * 100):
        while True:
            try:
                p.produce(topic, b"v" * 10_000)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(300) == 0
    return time.monotonic() - started


def _consume(bootstrap: str, topic: str, received: Synchronized[int], stop: EventType) -> None:
    """The consumer, in a process of its own (in the producer's process its
    polling alone costs the paced producer a second of latency, on main too)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            with received.get_lock():
                received.value += 1
    consumer.close()


PACE_S = 0.02
"""The paced producer's interval: 50 records a second."""


class _Clients:
    def __init__(self, c: LocalCluster, topic: str) -> None:
        self.c, self.topic = c, topic
        self.acks: list[tuple[float, float]] = []  # (sent at, latency)
        self.errors: list[str] = []
        self.count: Synchronized[int] = multiprocessing.Value("q", 0)
        self.stop = threading.Event()
        self.stop_consumer = multiprocessing.Event()
        self.consumer = multiprocessing.Process(
            target=_consume, args=(c.bootstrap, topic, self.count, self.stop_consumer))
        self.consumer.start()
        self.threads = [threading.Thread(target=self._produce)]
        for t in self.threads:
            t.start()

    @property
    def received(self) -> int:
        return int(self.count.value)

    def _produce(self) -> None:
        """One record every ``PACE_S`` on a fixed schedule (open loop: a slow
        answer does not delay the next record, as it would if each send waited
        for a poll that an earlier answer or a log event ends early)."""
        p = Producer({"bootstrap.servers": self.c.bootstrap, "acks": "all", "linger.ms": 0})
        due = time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= due:
                due += PACE_S
                p.produce(self.topic, b"x" * 1000, on_delivery=lambda e, _m, s=now: (
                    self.errors.append(str(e)) if e else self.acks.append(
                        (s, time.monotonic() - s))))
            p.poll(min(max(due - time.monotonic(), 0.0), 0.001))
        p.flush(30)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        time.sleep(2)  # the consumer catches up
        self.stop_consumer.set()
        self.consumer.join(30)

    def latency_ms(self, start: float, end: float) -> tuple[float, float]:
        lat = sorted(v * 1000 for s, v in self.acks if start <= s < end)
        return percentile(lat, 50), percentile(lat, 99)


def _reassign(c: LocalCluster, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "odradek", "reassign", *args,
                          "--bootstrap-server", c.bootstrap],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def run(args: argparse.Namespace, tmp: Path) -> None:
    overrides = {"replication.quota.window.num": str(args.window_num),
                 "offsets.topic.replication.factor": "3",
                 "group.initial.rebalance.delay.ms": "0"}
    c = LocalCluster(tmp, 3, overrides=overrides, metrics=True)
    c.format()
    c.start()
    try:
        wait_for("three brokers", lambda: len(AdminClient({"bootstrap.servers": c.bootstrap})
                                             .list_topics(timeout=5).brokers) == 3, 60, 0.3)
        _create(c, "big", [1])
        _create(c, "live", [1, 3, 2])
        fill_s = _fill(c, "big", args.megabytes)
        total = _size(c, 1, "big")
        print(f"filled {total / 1e6:.0f} MB in {fill_s:.1f} s")
        plan = tmp / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "big", "partition": 0, "replicas": [3]}]}))
        clients = _Clients(c, "live")
        time.sleep(5)  # the clients' unloaded baseline
        before = time.monotonic()
        _reassign(c, "--execute", "--reassignment-json-file", str(plan),
                  "--throttle", str(args.rate))
        started = time.monotonic()
        samples = []
        while time.monotonic() - started < 10 * total / args.rate + 120:
            size = _size(c, 3, "big")
            samples.append((time.monotonic() - started, size))
            if size >= total:
                break
            time.sleep(0.25)
        moved = time.monotonic() - started
        clients.close()
        verify_started = time.monotonic()
        while "is completed" not in _reassign(c, "--verify", "--reassignment-json-file",
                                              str(plan)):
            time.sleep(0.5)
        verify_s = time.monotonic() - verify_started
        first = next((t for t, s in samples if s > 0), 0.0)
        worst = max(((s1 - s0) / (t1 - t0) / args.rate
                     for t0, s0 in samples if t0 >= first + 1
                     for t1, s1 in samples[:] if t1 >= t0 + 3 and t1 < t0 + 3.3),
                    default=0.0)
        b50, b99 = clients.latency_ms(before - 3, before)  # after the warm-up
        d50, d99 = clients.latency_ms(started, started + moved)
        print(f"moved {total / 1e6:.0f} MB at --throttle {args.rate} in {moved:.1f} s: "
              f"{total / moved / 1e6:.2f} MB/s ({total / moved / args.rate:.2f}x the throttle); "
              f"worst 3 s window after the first second {worst:.2f}x")
        print(f"acks=all on another topic: p50/p99 {b50:.1f}/{b99:.1f} ms before, "
              f"{d50:.1f}/{d99:.1f} ms during; {len(clients.errors)} errors; "
              f"{clients.received} of {len(clients.acks)} consumed")
        print(f"--verify saw completion and cleared the throttles in {verify_s:.1f} s")
    finally:
        c.stop()
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            Path(args.logs, "nodes.log").write_text(c.logs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=64)
    parser.add_argument("--rate", type=int, default=4_000_000, help="--throttle, bytes/s")
    parser.add_argument("--window-num", type=int, default=2,
                        help="replication.quota.window.num")
    parser.add_argument("--big", action="store_true", help="1024 MB at 10 MB/s")
    parser.add_argument("--logs", help="write the nodes' log tails here")
    args = parser.parse_args()
    if args.big:
        args.megabytes, args.rate = 1024, 10_000_000
    with tempfile.TemporaryDirectory(prefix="reassign-bench-") as tmp:
        run(args, Path(tmp))


if __name__ == "__main__":
    main()

"""Consumer-group figures, against librdkafka's mock cluster in the same run.

    python benchmarks/groups_bench.py [--runs 3] [--members 10] [--commits 2000]

(a) Stabilisation: ``--members`` confluent-kafka consumers (range assignor),
    each polling on its own thread, subscribe to a 20-partition topic at the
    same moment; the clock stops when every member owns its share and the
    shares cover every partition once. Both brokers run with no initial
    rebalance delay (``group.initial.rebalance.delay.ms=0``; the mock has none).
(b) Commit throughput: one consumer of a stable 1-member group commits the
    offsets of 6 partitions, ``--commits`` times synchronously (each waits for
    the answer) and ``--commits`` times asynchronously (then waits for all).

Median of ``--runs`` runs, with min-max, and the ratio Odradek/mock.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.broker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MockCluster

PARTITIONS = 20


class Member(threading.Thread):
    def __init__(self, conf: dict[str, object], topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(conf)
        self.topic = topic
        self.owned = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        while not self.stop_event.is_set():
            self.consumer.poll(0.01)
            self.owned = len(self.consumer.assignment())
        self.consumer.close()


def stabilise(bootstrap: str, topic: str, group: str, members: int) -> float:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 200}
    threads = [Member(conf, topic) for _ in range(members)]
    share = {PARTITIONS // members + (1 if i < PARTITIONS % members else 0)
             for i in range(members)}
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    deadline = t0 + 120
    while not (sum(t.owned for t in threads) == PARTITIONS
               and {t.owned for t in threads} <= share and all(t.owned for t in threads)):
        if time.perf_counter() > deadline:
            raise RuntimeError("the group did not stabilise in 120 s")
        time.sleep(0.002)
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.stop_event.set()
    for t in threads:
        t.join()
    return elapsed


def commits(bootstrap: str, topic: str, group: str, n: int) -> tuple[float, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                  "enable.auto.commit": False})
    c.subscribe([topic])
    while not c.assignment():
        c.poll(0.05)
    tps = [TopicPartition(topic, p, 1) for p in range(6)]
    t0 = time.perf_counter()
    for i in range(n):
        for tp in tps:
            tp.offset = i + 1
        c.commit(offsets=tps, asynchronous=False)
    sync_rate = n / (time.perf_counter() - t0)
    done = threading.Semaphore(0)
    conf_cb: Callable[..., None] = lambda err, parts: done.release()  # noqa: E731
    c2 = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-async", "log_level": 3,
                   "enable.auto.commit": False, "on_commit": conf_cb})
    c2.subscribe([topic])
    while not c2.assignment():
        c2.poll(0.05)
    t0 = time.perf_counter()
    for i in range(n):
        c2.commit(offsets=[TopicPartition(topic, p, i + 1) for p in range(6)],
                  asynchronous=True)
        c2.poll(0)
    acked = 0
    while acked < n:
        c2.poll(0.01)
        while done.acquire(blocking=False):
            acked += 1
    async_rate = n / (time.perf_counter() - t0)
    c.close()
    c2.close()
    return sync_rate, async_rate


def run_target(
    bootstrap: str, tag: str, args: argparse.Namespace, mock: MockCluster | None = None
) -> tuple[float, float, float]:
    names = [f"{tag}-stab", f"{tag}-commit"]
    if mock is not None:  # the mock serves no CreateTopics
        mock.create_topic(names[0], PARTITIONS)
        mock.create_topic(names[1], 6)
    else:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        topics = [NewTopic(names[0], PARTITIONS), NewTopic(names[1], 6)]
        for f in admin.create_topics(topics).values():
            f.result()
    stab = stabilise(bootstrap, names[0], f"{tag}-g", args.members)
    sync_rate, async_rate = commits(bootstrap, names[1], f"{tag}-c", args.commits)
    return stab, sync_rate, async_rate


def _fmt(values: list[float], unit: str, scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"{statistics.median(v):10.1f} {unit} (min {min(v):.1f}, max {max(v):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()
    ours: list[tuple[float, float, float]] = []
    mock: list[tuple[float, float, float]] = []
    for run in range(args.runs):
        with Broker() as broker:
            ours.append(run_target(broker.bootstrap_servers, f"o{run}", args))
        with MockCluster() as cluster:
            mock.append(run_target(cluster.bootstrap, f"m{run}", args, cluster))
    print(f"runs: {args.runs}, members: {args.members}, commits per run: {args.commits}")
    for name, idx, unit, scale in (("stabilise", 0, "ms", 1000.0), ("sync commits", 1, "/s", 1.0),
                                   ("async commits", 2, "/s", 1.0)):
        o = [r[idx] for r in ours]
        m = [r[idx] for r in mock]
        ratio = statistics.median(o) / statistics.median(m)
        print(f"{name:14} odradek {_fmt(o, unit, scale)}   mock {_fmt(m, unit, scale)}   "
              f"odradek/mock {ratio:.2f}")


if __name__ == "__main__":
    main()

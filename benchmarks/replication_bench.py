"""Replicated partitions: what RF=3 costs a producer, and how long a partition takes to fail over.

    python benchmarks/replication_bench.py [--runs 10] [--throughput-runs 5]
        [--records 200000] [--sizes 100,1024] [--timers 9000/2000,3000/500]
        [--skip throughput,failover] [--logs DIR]

A 3-node combined KRaft cluster (``tests/support/cluster.py``: three ``odradek
serve`` processes on 127.0.0.1, formatted and started as a user would) and the
Python confluent-kafka client. The nodes and the client share the machine's
cores, so a follower's work competes with the leader's.

(a) Produce cost of replication, on one cluster in one run. For each record
    size and each of ``--throughput-runs`` runs, three cases in rotating
    order, each on a fresh 3-partition topic; every record goes to the
    partition led by the same broker (one that is not the active controller),
    so the cases differ only in replication:

    * ``RF=1, acks=all`` -- the baseline (with one replica, acks=all is acks=1);
    * ``RF=3, acks=1``;
    * ``RF=3, acks=all``, ``min.insync.replicas=2``.

    Flat out: ``--records`` values of the given size (plus an 8-byte key, the
    record's index, which matches each delivery report to its send time) with
    the suite's producer settings (``linger.ms=5``, ``batch.size=1 MiB``). One
    record is acknowledged before the clock starts (on a fresh topic it waits
    for the followers' first fetch; that time is logged); the clock runs from
    the first ``produce()`` until ``flush()`` returns with every record
    acknowledged: records/s, MB/s of values, and per-record latency (delivery
    callback time minus ``produce()`` time) p50/p99. Flat out, records wait in
    the client's queue, so that latency is mostly queueing (p50 is about half
    the run). The paced figure is the replication round trip: ``--rate``
    records/s for ``--paced-seconds`` with ``linger.ms=0``, latency p50/p99 the
    same way. Also: CPU seconds of the three node processes per GB of values.
    Baseline: RF=1 in the same run on the same leader; the RF=3/RF=1 ratios
    are printed. Kafka's expectation for acks=all is one follower fetch round
    trip more per request (the leader answers a waiting follower fetch as soon
    as records arrive) and, on a CPU-bound machine, the followers' work taken
    from the leader's throughput.

(b) Failover time. For each ``--timers SESSION/HEARTBEAT`` pair
    (``broker.session.timeout.ms``/``broker.heartbeat.interval.ms``; by default
    Kafka's 9000/2000, the baseline case, and a fast 3000/500) a fresh
    cluster; every other setting is Kafka's default. Each of ``--runs`` runs:
    a fresh topic (3 partitions, RF=3, ``min.insync.replicas=2``); a producer
    thread (acks=all, idempotent, ``linger.ms=0``) sends one 100 B record every
    5 ms to a partition whose leader is not the active controller (killing the
    controller too would add a quorum election, which ``cluster_bench.py``
    measures) and notes send and acknowledgement times; after 1 s of
    acknowledged traffic the leader gets ``kill -9``. Measured: the time from
    the kill to the first acknowledgement of a record sent after the kill.
    Two more figures show where that time goes: from the kill until a
    surviving broker's Metadata names a new leader (polled every 20 ms on one
    connection), and until a producer created at that moment has one acks=all
    record acknowledged (it starts with current metadata, so what the running
    producer takes beyond it is the client re-learning the leader: librdkafka
    re-queries a leader it cannot reach about once a second). Then every
    acknowledged record must be read back exactly once; the killed node is
    restarted, and the run ends when it is back in the ISR of every partition
    of the topic. Baseline: Kafka fences a broker after
    ``broker.session.timeout.ms`` without a heartbeat and only then elects new
    leaders for its partitions, which clients learn with one metadata refresh:
    the expected figure is about the session timeout (between session minus
    one heartbeat interval and session plus one propagation); the ratio
    printed is the median over the session timeout.

Every figure is the median of its runs with min-max. Delivery errors,
acknowledged records that cannot be read back, runs with no acknowledgement
after the kill, the number of fencings the controller logged against the
number of kills, and each cluster's WARNING/ERROR log lines and tracebacks
are printed, not hidden.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import percentile, proc_cpu_seconds
from cluster_bench import leader_of as quorum_leader
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from suite_kafka import PRODUCER

from odradek.client.connection import Connection
from odradek.wire.messages import metadata_request as mr
from tests.support.cluster import LocalCluster, wait_for

CASES = (("RF=1, acks=all", 1, "all"), ("RF=3, acks=1", 3, "1"), ("RF=3, acks=all", 3, "all"))
BASELINE = CASES[0][0]
MIN_ISR = {"min.insync.replicas": "2"}
SEND_INTERVAL_S = 0.005
FRESH_KEY = (1 << 62).to_bytes(8, "big")  # never one of the paced producer's indexes


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _size(n: int) -> str:
    return "1 KiB" if n == 1024 else f"{n} B"


def _range(values: Sequence[float], fmt: str = ",.0f") -> str:
    return (f"{statistics.median(values):{fmt}} "
            f"({min(values):{fmt}}–{max(values):{fmt}})")


# --------------------------------------------------------------------------- the cluster


@contextmanager
def running_cluster(name: str, overrides: dict[str, str],
                    logs: Path | None) -> Iterator[LocalCluster]:
    """A formatted, started 3-node cluster; at the end it is stopped, its nodes'
    WARNING/ERROR lines are summarised, and their logs copied to ``logs/name``."""
    with tempfile.TemporaryDirectory(prefix="odradek-repl-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 3, overrides=overrides)
        cluster.format()
        cluster.start()
        try:
            wait_for("three live brokers", lambda: len(
                _admin(cluster).list_topics(timeout=5).brokers) == 3, 60, 0.5)
            yield cluster
        finally:
            cluster.stop()
            warnings: Counter[str] = Counter()
            for node in cluster.nodes.values():
                text = node.log_path.read_text(errors="replace")
                for log_line in text.splitlines():
                    m = re.match(r"\S+ \S+ (WARNING|ERROR|CRITICAL) (.*)", log_line)
                    if m:
                        warnings[f"{m[1]} {re.sub(r'[0-9]+', '#', m[2])}"] += 1
                if "Traceback" in text:
                    at = text.index("Traceback")
                    print(f"!! node {node.node_id}'s log has a traceback:\n"
                          f"{text[max(0, at - 1500):at + 3000]}", flush=True)
            print(f"  {name} cluster, warnings and errors in the nodes' logs (digits as #): "
                  + ("; ".join(f"{n}x {w}" for w, n in warnings.most_common(8)) or "none"),
                  flush=True)
            if logs is not None:
                (logs / name).mkdir(parents=True, exist_ok=True)
                for node in cluster.nodes.values():
                    shutil.copy(node.log_path, logs / name / node.log_path.name)


def _admin(cluster: LocalCluster) -> AdminClient:
    # log_level 2: no line for each refused connection to a node starting or killed
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})


def partitions_of(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as the cluster's Metadata says."""
    md = admin.list_topics(topic, timeout=5).topics[topic]
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in md.partitions.items()}


def create_topic(admin: AdminClient, name: str, partitions: int, rf: int,
                 configs: dict[str, str]) -> dict[int, tuple[int, list[int], list[int]]]:
    def attempt() -> bool:
        futures = admin.create_topics([NewTopic(name, partitions, rf, config=configs)])
        try:
            futures[name].result(10)
            return True
        except Exception as exc:  # a killed broker is listed until it is fenced: retry
            return "already exists" in str(exc)
    wait_for(f"topic {name}", attempt, 60, 0.5)
    return wait_for(f"{name} with a leader and a full ISR everywhere", lambda: (
        parts := partitions_of(admin, name)) and all(
        lead >= 0 and len(isr) == rf for lead, _, isr in parts.values()) and parts, 30, 0.1)


def controller_of(cluster: LocalCluster) -> int:
    alive = [n for n, node in cluster.nodes.items() if node.alive]
    leader: int = wait_for("an active controller",
                           lambda: (view := quorum_leader(cluster, alive)) and view[0], 60)
    return leader


def nodes_cpu_seconds(cluster: LocalCluster) -> float:
    return sum(proc_cpu_seconds(node.proc.pid) for node in cluster.nodes.values()
               if node.proc is not None and node.alive)


# --------------------------------------------------------------------------- (a) throughput


@dataclass
class ProduceRun:
    records_per_s: float
    mb_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_s_per_gb: float
    warm_up_ms: float  # the first record on the fresh topic, before the clock


def _keyed_producer(conf: dict[str, object], count: int
                    ) -> tuple[Producer, list[float], list[float], list[str], Callable[..., None]]:
    sent = [0.0] * count
    acked = [0.0] * count
    errors: list[str] = []
    now = time.perf_counter

    def delivered(err: KafkaError | None, msg: Message) -> None:
        i = int.from_bytes(msg.key(), "big")
        if err is None:
            acked[i] = now()
        else:
            errors.append(f"record {i}: {err}")
    return Producer(conf), sent, acked, errors, delivered


def _latencies_ms(sent: list[float], acked: list[float]) -> list[float]:
    return sorted((a - s) * 1000 for s, a in zip(sent, acked, strict=True) if a)


def produce_flat(cluster: LocalCluster, topic: str, partition: int, count: int, size: int,
                 acks: str) -> ProduceRun:
    p, sent, acked, errors, delivered = _keyed_producer(
        {"bootstrap.servers": cluster.bootstrap, **PRODUCER, "acks": acks}, count + 1)
    value = (os.urandom(size // 2) + b"x" * size)[:size]
    keys = [i.to_bytes(8, "big") for i in range(count + 1)]
    # One record before the clock: metadata, connections, and the followers' first
    # fetch of a new partition (which waits for their fetch already parked at the
    # leader, up to replica.fetch.wait.max.ms) are not part of the throughput.
    sent[count] = time.perf_counter()
    p.produce(topic, value, keys[count], partition, delivered)
    if p.flush(30) or errors:
        raise RuntimeError(f"{topic}: warm-up record not acknowledged: {errors}")
    warm_ms = (acked[count] - sent[count]) * 1000
    send, now = p.produce, time.perf_counter
    cpu0 = nodes_cpu_seconds(cluster)
    t0 = now()
    for i in range(count):
        sent[i] = now()
        try:
            send(topic, value, keys[i], partition, delivered)
        except BufferError:
            p.poll(0.05)
            sent[i] = now()
            send(topic, value, keys[i], partition, delivered)
        if not i & 1023:
            p.poll(0)
    left = p.flush(180)
    elapsed = now() - t0
    cpu = nodes_cpu_seconds(cluster) - cpu0
    lat = _latencies_ms(sent[:count], acked[:count])
    if left or errors or len(lat) != count:
        raise RuntimeError(f"{topic}: {len(lat)}/{count} acknowledged, {left} left in the "
                           f"queue, {len(errors)} errors, first: {errors[:3]}")
    return ProduceRun(count / elapsed, count * size / elapsed / 1e6, percentile(lat, 50),
                      percentile(lat, 99), cpu / (count * size / 1e9), warm_ms)


def produce_flat_gaps(cluster: LocalCluster, topic: str, partition: int, count: int,
                      size: int) -> tuple[float, float, int]:
    """``count`` records flat out with acks=all: (records/s, the slowest gap in ms
    between two consecutive acknowledgements, the index of the record after it)."""
    p, sent, acked, errors, delivered = _keyed_producer(
        {"bootstrap.servers": cluster.bootstrap, **PRODUCER, "acks": "all"}, count + 1)
    value = (os.urandom(size // 2) + b"x" * size)[:size]
    # One record before the clock, as in produce_flat: the followers' first fetch.
    p.produce(topic, value, count.to_bytes(8, "big"), partition, delivered)
    if p.flush(30) or errors:
        raise RuntimeError(f"{topic}: warm-up record not acknowledged: {errors}")
    acked.pop()
    send, now = p.produce, time.perf_counter
    t0 = now()
    for i in range(count):
        key = i.to_bytes(8, "big")
        sent[i] = now()
        try:
            send(topic, value, key, partition, delivered)
        except BufferError:
            p.poll(0.05)
            send(topic, value, key, partition, delivered)
        if not i & 1023:
            p.poll(0)
    left = p.flush(180)
    elapsed = now() - t0
    if left or errors or not all(acked):
        raise RuntimeError(f"{topic}: {sum(1 for a in acked if a)}/{count} acknowledged, "
                           f"{left} left, {len(errors)} errors, first: {errors[:3]}")
    order = sorted(range(count), key=acked.__getitem__)
    times = [t0] + [acked[i] for i in order]
    gap, at = max((times[k + 1] - times[k], k) for k in range(count))
    return count / elapsed, gap * 1000, order[at]


def produce_paced(cluster: LocalCluster, topic: str, partition: int, rate: int,
                  seconds: float, size: int, acks: str) -> tuple[float, float]:
    count = int(rate * seconds)
    p, sent, acked, errors, delivered = _keyed_producer(
        {"bootstrap.servers": cluster.bootstrap, **PRODUCER, "acks": acks, "linger.ms": 0},
        count + 1)
    value = (os.urandom(size // 2) + b"x" * size)[:size]
    p.produce(topic, value, count.to_bytes(8, "big"), partition, delivered)  # warm-up
    p.flush(30)
    now = time.perf_counter
    t0 = now()
    i = 0
    while i < count:
        due = min(count, int((now() - t0) * rate) + 1)
        while i < due:
            sent[i] = now()
            p.produce(topic, value, i.to_bytes(8, "big"), partition, delivered)
            i += 1
        # 1 ms steps, as the suite's latency phase: callbacks are served at once
        p.poll(0.001)
    left = p.flush(60)
    lat = _latencies_ms(sent[:count], acked[:count])
    if left or errors or len(lat) != count:
        raise RuntimeError(f"{topic} paced: {len(lat)}/{count} acknowledged, {left} left, "
                           f"{len(errors)} errors, first: {errors[:3]}")
    return percentile(lat, 50), percentile(lat, 99)


@dataclass
class CaseResults:
    flat: list[ProduceRun] = field(default_factory=list)
    paced_p50: list[float] = field(default_factory=list)
    paced_p99: list[float] = field(default_factory=list)


def bench_throughput(cluster: LocalCluster, runs: int, records: int, sizes: list[int],
                     rate: int, paced_s: float) -> None:
    admin = _admin(cluster)
    controller = controller_of(cluster)
    leader = min(n for n in cluster.nodes if n != controller)
    _log(f"throughput: active controller {controller}; every case writes to a partition "
         f"led by broker {leader}")
    for size in sizes:
        results = {name: CaseResults() for name, _, _ in CASES}
        for run in range(runs):
            for name, rf, acks in CASES[run % 3:] + CASES[:run % 3]:
                topic = f"tp-{size}-{run}-rf{rf}-acks{acks}"
                parts = create_topic(admin, topic, 3, rf, MIN_ISR if rf == 3 else {})
                partition = next((p for p, (lead, _, _) in sorted(parts.items())
                                  if lead == leader), None)
                if partition is None:
                    raise RuntimeError(f"{topic}: no partition led by {leader}: {parts}")
                os.sync()
                r = produce_flat(cluster, topic, partition, records, size, acks)
                os.sync()  # the flat-out run's dirty pages would throttle the paced one
                p50, p99 = produce_paced(cluster, topic, partition, rate, paced_s, size, acks)
                admin.delete_topics([topic])[topic].result(30)
                res = results[name]
                res.flat.append(r)
                res.paced_p50.append(p50)
                res.paced_p99.append(p99)
                _log(f"run {run + 1} {_size(size)} {name:15} {r.records_per_s:>8,.0f} rec/s "
                     f"{r.mb_per_s:6.1f} MB/s, flat-out p50 {r.p50_ms:.0f} p99 {r.p99_ms:.0f} "
                     f"ms, paced p50 {p50:.2f} p99 {p99:.2f} ms, {r.cpu_s_per_gb:.1f} CPU s/GB; "
                     f"first record on the new topic {r.warm_up_ms:.0f} ms")
        print(f"\nProduce, {_size(size)} values x {records:,}, one partition led by broker "
              f"{leader}, {runs} runs: median (min–max); paced at {rate:,}/s for {paced_s:g} s",
              flush=True)
        print("| case | records/s | MB/s | flat-out p50 ms | flat-out p99 ms | paced p50 ms "
              "| paced p99 ms | CPU s/GB (3 nodes) |")
        print("|---|---|---|---|---|---|---|---|")
        for name, res in results.items():
            f = res.flat
            print(f"| {name} | {_range([x.records_per_s for x in f])} "
                  f"| {_range([x.mb_per_s for x in f], '.1f')} "
                  f"| {_range([x.p50_ms for x in f])} | {_range([x.p99_ms for x in f])} "
                  f"| {_range(res.paced_p50, '.2f')} | {_range(res.paced_p99, '.2f')} "
                  f"| {_range([x.cpu_s_per_gb for x in f], '.1f')} |")
        base = results[BASELINE]

        def med(res: CaseResults, what: str) -> float:
            if what.startswith("paced"):
                return statistics.median(getattr(res, what))
            return statistics.median([getattr(x, what) for x in res.flat])
        for name, res in results.items():
            if name != BASELINE:
                print(f"{name} / {BASELINE}: " + ", ".join(
                    f"{label} x{med(res, what) / (med(base, what) or float('nan')):.2f}"
                    for label, what in (
                        ("records/s", "records_per_s"), ("paced p50", "paced_p50"),
                        ("paced p99", "paced_p99"), ("CPU/GB", "cpu_s_per_gb"))), flush=True)


# --------------------------------------------------------------------------- (b) failover


class PacedProducer(threading.Thread):
    """One 100 B record every 5 ms, acks=all, idempotent; send and ack times by index."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partition = bootstrap, topic, partition
        self.sent: list[float] = []
        self.acked: dict[int, float] = {}
        self.errors: list[str] = []
        self.kill_at: float | None = None
        self.first_after_kill: float | None = None
        self.left = -1
        self.stopping = threading.Event()

    def run(self) -> None:
        now = time.perf_counter
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 0,
                      "message.timeout.ms": 120_000})

        def delivered(err: KafkaError | None, msg: Message) -> None:
            t = now()
            i = int.from_bytes(msg.key(), "big")
            if err is not None:
                self.errors.append(f"record {i}: {err}")
                return
            self.acked[i] = t
            k = self.kill_at
            if k is not None and self.first_after_kill is None and self.sent[i] > k:
                self.first_after_kill = t
        pad = b"." * 100
        due = now()
        while not self.stopping.is_set():
            i = len(self.sent)
            self.sent.append(now())
            p.produce(self.topic, (f"{self.topic}/{i}/".encode() + pad)[:100],
                      i.to_bytes(8, "big"), self.partition, delivered)
            due = max(due + SEND_INTERVAL_S, now() - SEND_INTERVAL_S)
            while (wait := due - now()) > 0:
                p.poll(wait)
        self.left = p.flush(120)


@dataclass
class FailoverRun:
    victim: int
    ack_ms: float | None  # kill -> first ack of a record sent after the kill
    metadata_ms: float | None  # kill -> a survivor's Metadata names a new leader
    fresh_ms: float | None  # kill -> ack of a producer created at that moment
    sent: int
    acked: int
    errors: list[str]
    missing: int  # acknowledged but not read back
    duplicated: int
    rejoin_s: float


async def _watch_leader(address: str, topic: str, partition: int, old: int,
                        timeout_s: float) -> float | None:
    conn = await Connection.open(address, "bench", timeout_s=2)
    try:
        request = mr.MetadataRequest([mr.MetadataRequestTopic(name=topic)],
                                     allow_auto_topic_creation=False)
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            resp = await asyncio.wait_for(conn.request(request, 9), 2)
            for pm in resp.topics[0].partitions:
                if pm.partition_index == partition and pm.leader_id not in (-1, old):
                    return time.perf_counter()
            await asyncio.sleep(0.02)
        return None
    finally:
        await conn.close()


def fresh_ack(cluster: LocalCluster, topic: str, partition: int) -> float | None:
    """A new producer (acks=all) sends one record: when is it acknowledged? It
    starts with current metadata, so this is the broker side of the failover
    without the long-lived client's wait to re-learn the leader."""
    acked: list[float] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 60_000, "log_level": 2})
    p.produce(topic, b"fresh", FRESH_KEY, partition,
              lambda err, _m: err is None and acked.append(time.perf_counter()))
    p.flush(60)
    return acked[0] if acked else None


def read_back(cluster: LocalCluster, topic: str, partition: int) -> Counter[int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(topic, partition)
        _, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([TopicPartition(topic, partition, 0)])
        seen: Counter[int] = Counter()
        last, deadline = -1, time.monotonic() + 60
        while last < high - 1 and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    seen[int.from_bytes(m.key(), "big")] += 1
                    last = m.offset()
        return seen
    finally:
        c.close()


def failover_run(cluster: LocalCluster, admin: AdminClient, tag: str, run: int) -> FailoverRun:
    controller = controller_of(cluster)
    topic = f"failover-{tag}-{run}"
    parts = create_topic(admin, topic, 3, 3, MIN_ISR)
    candidates = sorted((lead, p) for p, (lead, _, _) in parts.items() if lead != controller)
    victim, partition = candidates[run % len(candidates)]
    producer = PacedProducer(cluster.bootstrap, topic, partition)
    producer.start()
    wait_for("acknowledgements before the kill", lambda: len(producer.acked) >= 20, 30, 0.05)
    time.sleep(1.0)
    survivor = next(n for n in cluster.nodes.values() if n.node_id != victim)
    cluster.kill(victim)
    t_kill = time.perf_counter()
    producer.kill_at = t_kill
    seen_at = asyncio.run(_watch_leader(survivor.address, topic, partition, victim, 90))
    fresh_at = fresh_ack(cluster, topic, partition) if seen_at else None
    deadline = time.perf_counter() + 90
    while producer.first_after_kill is None and time.perf_counter() < deadline:
        time.sleep(0.005)
    first = producer.first_after_kill
    time.sleep(0.5)  # a little traffic on the new leader
    producer.stopping.set()
    producer.join(150)
    if first is None:
        _log(f"!! no acknowledgement within 90 s of killing {victim}\n{cluster.logs()}")
    seen = read_back(cluster, topic, partition)
    missing = sum(1 for i in producer.acked if i not in seen)
    duplicated = sum(1 for n in seen.values() if n > 1)
    t0 = time.perf_counter()
    cluster.start(victim)
    wait_for(f"node {victim} back in every ISR of {topic}", lambda: all(
        victim in isr for _, _, isr in partitions_of(admin, topic).values()), 120, 0.2)
    return FailoverRun(
        victim, (first - t_kill) * 1000 if first else None,
        (seen_at - t_kill) * 1000 if seen_at else None,
        (fresh_at - t_kill) * 1000 if fresh_at else None, len(producer.sent),
        len(producer.acked), producer.errors + ([f"{producer.left} never delivered"]
                                                if producer.left else []),
        missing, duplicated, time.perf_counter() - t0)


def bench_failover(session_ms: int, heartbeat_ms: int, runs: int,
                   logs: Path | None) -> None:
    overrides = {"broker.session.timeout.ms": str(session_ms),
                 "broker.heartbeat.interval.ms": str(heartbeat_ms)}
    nan = float("nan")
    with running_cluster(f"failover-{session_ms}", overrides, logs) as cluster:
        admin = _admin(cluster)
        out: list[FailoverRun] = []
        for run in range(runs):
            r = failover_run(cluster, admin, f"{session_ms}", run)
            out.append(r)
            _log(f"failover {session_ms}/{heartbeat_ms} run {run + 1}: killed {r.victim}; new "
                 f"leader in Metadata after {r.metadata_ms or nan:.0f} ms, new producer's ack "
                 f"{r.fresh_ms or nan:.0f} ms, running producer's first ack "
                 f"{r.ack_ms or nan:.0f} ms; {r.acked}/{r.sent} acked, {len(r.errors)} errors, "
                 f"{r.missing} missing, {r.duplicated} duplicated; back in the ISR "
                 f"{r.rejoin_s:.1f} s after restart")
        fences = sum(node.log_path.read_text(errors="replace").count("missed heartbeats")
                     for node in cluster.nodes.values())
        report_failover(session_ms, heartbeat_ms, out, fences)


def report_failover(session_ms: int, heartbeat_ms: int, out: list[FailoverRun],
                    fences: int) -> None:
    runs = len(out)
    print(f"\nFailover, broker.session.timeout.ms={session_ms}, "
          f"broker.heartbeat.interval.ms={heartbeat_ms}, {runs} runs: median (min–max)")

    def line(what: str, values: list[float | None], ratio: bool = False) -> None:
        got = [v for v in values if v is not None]
        if not got:
            print(f"  {what}: never")
            return
        text = f"  {what}: {_range(got)} ms"
        if ratio:
            text += (f"; Kafka ≈ the session timeout, {session_ms} ms: ratio "
                     f"{statistics.median(got) / session_ms:.2f}")
        if len(got) < len(values):
            text += f" ({len(values) - len(got)} runs never)"
        print(text)
    line("kill -9 of the leader -> first acks=all acknowledgement of a record sent after the "
         "kill (the running producer)", [r.ack_ms for r in out], ratio=True)
    line("kill -9 -> a survivor's Metadata names a new leader", [r.metadata_ms for r in out],
         ratio=True)
    line("kill -9 -> acknowledgement of one record from a producer created at that moment",
         [r.fresh_ms for r in out])
    print(f"  killed node back in the ISR after restart: "
          f"{_range([r.rejoin_s for r in out], '.1f')} s")
    errors = [e for r in out for e in r.errors]
    missing, duplicated = sum(r.missing for r in out), sum(r.duplicated for r in out)
    print(f"  delivery errors: {len(errors)}"
          f"{' (first: ' + '; '.join(errors[:3]) + ')' if errors else ''}; "
          f"acknowledged records not read back: {missing}; read back twice: {duplicated}; "
          f"the controller logged {fences} fencings for {runs} kills", flush=True)


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="failover runs per timer setting")
    parser.add_argument("--throughput-runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=200_000,
                        help="records per flat-out run, each size")
    parser.add_argument("--sizes", default="100,1024", help="value sizes in bytes")
    parser.add_argument("--rate", type=int, default=1000, help="records/s of the paced runs")
    parser.add_argument("--paced-seconds", type=float, default=3.0)
    parser.add_argument("--timers", default="9000/2000,3000/500",
                        help="SESSION/HEARTBEAT ms pairs for the failover phase")
    parser.add_argument("--skip", default="", help="comma list: throughput,failover")
    parser.add_argument("--logs", type=Path, help="copy every node's log here (one folder "
                        "per cluster) before the cluster's files are removed")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    timers = [tuple(int(x) for x in pair.split("/")) for pair in args.timers.split(",") if pair]
    t0 = time.perf_counter()
    print(f"replication_bench: 3 combined nodes on 127.0.0.1, {os.cpu_count()} CPUs", flush=True)
    if "throughput" not in skip:
        with running_cluster("throughput", {}, args.logs) as cluster:
            bench_throughput(cluster, args.throughput_runs, args.records,
                             [int(s) for s in args.sizes.split(",")], args.rate,
                             args.paced_seconds)
    if "failover" not in skip:
        for session_ms, heartbeat_ms in timers:
            bench_failover(session_ms, heartbeat_ms, args.runs, args.logs)
    print(f"\n(took {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

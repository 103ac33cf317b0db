"""End-to-end throughput, latency, start-up time and memory of ``odradek serve``,
against librdkafka's in-process mock cluster in the same run.

    python benchmarks/produce_consume.py [--quick] [--runs N] [--json PATH]

What is measured (the Python confluent-kafka client on both sides, identical
settings: linger.ms=5, batch.size=1048576, batch.num.messages=1000000,
message.max.bytes=1048588 so that batch.size really is the cap, acks=1, no
compression; 1 topic x 6 partitions, records sent round-robin to partitions
with no key):

* produce: msg/s and MB/s of values (1 MB = 10^6 bytes of record values, not
  framing) for 100 B and 1 KiB values. The clock runs from the first
  ``produce()`` to the return of ``flush()``; every record is counted by its
  delivery callback and a run fails unless all were acknowledged.
* consume: a new consumer assigns all 6 partitions and reads until it has
  every record of its window; clock from ``assign()`` to the last record. The
  window is the newest ~4 MB of each partition (see CONSUME_WINDOW: the mock
  keeps no more), read in several passes, each by a fresh consumer. Both
  clients connect and fetch metadata before their clock starts.
* end-to-end latency at a paced 10,000 msg/s of 100 B values, with linger.ms=0
  (everything else as above): the producer writes ``perf_counter_ns()`` into
  each value just before ``produce()``; a consumer on another thread of this
  process records receive time minus that. p50 and p99 per run.
* ``odradek serve`` start-up: wall time from ``Popen`` to the ``odradek:
  serving on`` line (median of several starts, each with a fresh data dir),
  next to the bare ``python -c pass`` time of this interpreter.
* broker memory: VmRSS of the broker process at ready, after 1 s idle, and
  after the whole workload (2 s idle), plus VmHWM (peak).

Every figure is the median of ``--runs`` runs (at least 3) with min-max. Runs
alternate which target goes first, each on a fresh topic (deleted after), so
drift on a shared machine hits both sides alike. The mock cluster runs on a
thread of this process, so it shares the client's two cores; odradek runs in
its own process. Both are reached over loopback TCP.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # benchmarks/ is not a package: found through sys.path
    BrokerProcess,
    MockCluster,
    Summary,
    cpu_pressure,
    percentile,
    proc_cpu_seconds,
    proc_memory_mib,
    python_startup_s,
    raise_on_sigterm,
    serve_command,
    stopping,
)

PARTITIONS = 6
SIZES = (100, 1024)
LATENCY_RATE = 10_000
LATENCY_VALUE_BYTES = 100
LATENCY_LINGER_MS = 0
# Consumer fetch.wait.max.ms for the latency runs: the default (500), then a
# small one. The mock cluster answers a Fetch that finds no data only after the
# full wait and is not woken by new records, so under the default its latency
# is an artefact of that wait; a real broker (and odradek) answers a long poll
# as soon as a record arrives.
LATENCY_FETCH_WAITS_MS = (500, 10)
GOAL_THROUGHPUT_RATIO = 0.8
GOAL_READY_S = 0.5
GOAL_IDLE_RSS_MIB = 60.0

CLIENT_SETTINGS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 1_000_000,
    # librdkafka caps a batch at min(batch.size, message.max.bytes); its
    # message.max.bytes default (1,000,000) would quietly cap batch.size below
    # 1 MiB. 1048588 is Kafka's (and odradek's) broker default.
    "message.max.bytes": 1_048_588,
    "acks": 1,
    "enable.idempotence": False,
    "compression.type": "none",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
}


# librdkafka's mock keeps only the newest 5 MiB (or 100,000 batches) of each
# partition (rd_kafka_mock_partition_init: max_size, max_cnt; not settable), so
# a consumer cannot read a large run back from offset 0. Consumers read the
# newest CONSUME_WINDOW records of each partition (about 4 MB of values: fits
# in the mock's 5 MiB with record framing), the same on both targets, in
# several passes with a fresh consumer each to get a measurable duration.
CONSUME_WINDOW = {100: 36_000, 1024: 4_000}

CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    # Once more than queued.min.messages (default 100,000) wait in the local
    # queue, librdkafka stops fetching for fetch.queue.backoff.ms (1 s): with
    # 100 B records one pass would then measure a 1 s client pause, on
    # either target. Above any window, so fetching never pauses.
    "queued.min.messages": 1_000_000,
}


@dataclass(frozen=True)
class Mode:
    name: str
    messages: dict[int, int]  # value size -> records per produce run
    consume_passes: dict[int, int]  # value size -> passes over CONSUME_WINDOW per run
    latency_s: float
    starts: int


QUICK = Mode("quick", {100: 300_000, 1024: 60_000}, consume_passes={100: 3, 1024: 6},
             latency_s=1.5, starts=3)
DEFAULT = Mode("default", {100: 2_000_000, 1024: 600_000}, consume_passes={100: 8, 1024: 24},
               latency_s=5.0, starts=7)


# --------------------------------------------------------------------------- targets


class Target(Protocol):
    name: str
    bootstrap: str

    def create_topic(self, topic: str) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def cpu_seconds(self) -> float:
        """CPU time the server side has used so far (user + system)."""
        ...


class OdradekTarget:
    name = "odradek"

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str) -> None:
        self.admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic])[topic].result(30)

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.broker.pid)

    def close(self) -> None:
        """Drop the admin client before the broker goes (no reconnect noise)."""
        del self.admin


class MockTarget:
    name = "mock"

    def __init__(self, mock: MockCluster) -> None:
        self.mock = mock
        self.bootstrap = mock.bootstrap

    def create_topic(self, topic: str) -> None:
        self.mock.create_topic(topic, PARTITIONS)

    def delete_topic(self, topic: str) -> None:
        self.mock.delete_topic(topic)

    def cpu_seconds(self) -> float:
        return self.mock.cpu_seconds()

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- measurements


@dataclass
class Throughput:
    seconds: float
    messages: int
    value_bytes: int
    server_cpu_s: float  # odradek process, or the mock cluster's threads

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6

    @property
    def server_cpu_us_per_msg(self) -> float:
        return self.server_cpu_s / self.messages * 1e6

    @property
    def server_cpu_pct(self) -> float:
        return 100 * self.server_cpu_s / self.seconds


def _producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **CLIENT_SETTINGS, **extra})


def _consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_SETTINGS,
                     **extra})


def produce_run(target: Target, topic: str, count: int, size: int,
                timeout_s: float) -> Throughput:
    acked = 0
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif len(errors) < 10:
            errors.append(err)

    producer = _producer(target.bootstrap)
    producer.list_topics(topic, timeout=10)  # connected, metadata known
    value = os.urandom(size)
    produce = producer.produce
    cpu0 = target.cpu_seconds()
    t0 = time.perf_counter()
    for i in range(count):
        try:
            produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
        except BufferError:  # local queue full: serve callbacks, then retry once more
            producer.poll(0.05)
            produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
        if not i & 4095:
            producer.poll(0)
    left = producer.flush(timeout_s)
    elapsed = time.perf_counter() - t0
    cpu = target.cpu_seconds() - cpu0
    if left or errors or acked != count:
        raise RuntimeError(f"{target.name} produce: {acked}/{count} acked, {left} left, "
                           f"errors {errors}")
    return Throughput(elapsed, count, count * size, cpu)


def _window_starts(consumer: Consumer, topic: str, per_partition: int,
                   what: str) -> list[TopicPartition]:
    """Where the newest ``per_partition`` records of each partition begin."""
    starts = []
    for p in range(PARTITIONS):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if high - low < per_partition:
            raise RuntimeError(f"{what}: partition {p} holds {high - low} records, "
                               f"{per_partition} needed")
        starts.append(TopicPartition(topic, p, high - per_partition))
    return starts


def _read_window(consumer: Consumer, starts: list[TopicPartition], want: int, stall_s: float,
                 what: str) -> tuple[int, int]:
    """Assign ``starts`` and read ``want`` records; (records, value bytes)."""
    got = nbytes = 0
    last_progress = time.perf_counter()
    consumer.assign(starts)
    while got < want:
        # consume(n) returns early only once it has n records: never ask for
        # more than are left, or the last call would sit out its timeout.
        msgs = consumer.consume(min(10_000, want - got), 1.0)
        now = time.perf_counter()
        if msgs:
            last_progress = now
        elif now - last_progress > stall_s:
            raise RuntimeError(f"{what}: {got}/{want} records, none for {stall_s:g} s")
        for msg in msgs:
            err = msg.error()
            if err is not None:
                raise RuntimeError(f"{what}: {err}")
            nbytes += len(msg)
        got += len(msgs)
    return got, nbytes


def consume_run(target: Target, topic: str, per_partition: int, passes: int) -> Throughput:
    """``passes`` fresh consumers, each reading the newest ``per_partition``
    records of all partitions; the clock runs from ``assign()`` to the last
    record of each pass (connection and metadata are set up before it)."""
    elapsed = 0.0
    records = nbytes = 0
    cpu_s = 0.0
    for n in range(passes):
        consumer = _consumer(target.bootstrap, f"bench-{topic}-{n}")
        try:
            what = f"{target.name} consume"
            starts = _window_starts(consumer, topic, per_partition, what)  # connects, too
            cpu0 = target.cpu_seconds()
            t0 = time.perf_counter()
            got, size = _read_window(consumer, starts, per_partition * PARTITIONS, 15.0, what)
            elapsed += time.perf_counter() - t0
            cpu_s += target.cpu_seconds() - cpu0
        finally:
            consumer.close()
        records += got
        nbytes += size
    return Throughput(elapsed, records, nbytes, cpu_s)


@dataclass
class Latency:
    p50_ms: float
    p99_ms: float
    max_ms: float
    samples: int
    achieved_rate: float


def latency_run(target: Target, topic: str, seconds: float, fetch_wait_ms: int) -> Latency:
    """Paced produce at LATENCY_RATE; a consumer thread times each arrival."""
    total = int(LATENCY_RATE * seconds)
    samples: list[int] = []
    warm = threading.Event()
    done = threading.Event()
    failure: list[BaseException] = []
    pad = b"\0" * (LATENCY_VALUE_BYTES - 9)

    def consume() -> None:
        consumer = _consumer(target.bootstrap, f"bench-{topic}",
                             **{"fetch.wait.max.ms": fetch_wait_ms})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            warmups = 0
            deadline = time.monotonic() + seconds + 60
            while len(samples) < total and time.monotonic() < deadline and not done.is_set():
                # poll(), not consume(n, timeout): the latter waits for n records
                # or the whole timeout, which would be measured as latency.
                msg = consumer.poll(0.05)
                now = time.perf_counter_ns()
                if msg is None:
                    continue
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                value = msg.value()
                assert value is not None
                if value[:1] == b"M":
                    samples.append(now - int.from_bytes(value[1:9], "big"))
                else:
                    warmups += 1
                    if warmups == PARTITIONS:
                        warm.set()
        except BaseException as exc:
            failure.append(exc)
            warm.set()
        finally:
            consumer.close()

    reader = threading.Thread(target=consume, name="latency-consumer", daemon=True)
    reader.start()
    producer = _producer(target.bootstrap, **{"linger.ms": LATENCY_LINGER_MS})
    try:
        # Warm-up: one record per partition, seen by the consumer, before timing.
        for p in range(PARTITIONS):
            producer.produce(topic, b"W" + pad, partition=p)
        producer.flush(10)
        if not warm.wait(30) or failure:
            raise RuntimeError(f"{target.name} latency warm-up failed: {failure}")
        produce = producer.produce
        t0 = time.perf_counter()
        sent = 0
        while sent < total:
            due = min(total, int((time.perf_counter() - t0) * LATENCY_RATE) + 1)
            while sent < due:
                stamp = time.perf_counter_ns().to_bytes(8, "big")
                produce(topic, b"M" + stamp + pad, partition=sent % PARTITIONS)
                sent += 1
            producer.poll(0)
            time.sleep(0.001)  # tighter loops starve the broker of CPU on 2 cores
        achieved = total / (time.perf_counter() - t0)
        producer.flush(30)
        reader.join(seconds + 60)
    finally:
        done.set()
        reader.join(10)
    if failure:
        raise RuntimeError(f"{target.name} latency consumer: {failure[0]!r}")
    if len(samples) < total:
        raise RuntimeError(f"{target.name} latency: {len(samples)}/{total} records seen")
    ordered = sorted(samples)
    return Latency(percentile(ordered, 50) / 1e6, percentile(ordered, 99) / 1e6,
                   ordered[-1] / 1e6, len(ordered), achieved)


# --------------------------------------------------------------------------- the run


@dataclass
class Results:
    produce: dict[tuple[str, int], list[Throughput]] = field(default_factory=dict)
    consume: dict[tuple[str, int], list[Throughput]] = field(default_factory=dict)
    latency: dict[tuple[str, int], list[Latency]] = field(default_factory=dict)
    ready_s: list[float] = field(default_factory=list)
    rss_at_ready_mib: list[float] = field(default_factory=list)
    memory: dict[str, dict[str, float]] = field(default_factory=dict)
    python_startup: Summary | None = None
    load: dict[str, list[float]] = field(default_factory=dict)
    pressure: dict[str, str] = field(default_factory=dict)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure_startup(mode: Mode, results: Results) -> None:
    results.python_startup = python_startup_s(mode.starts)
    for _ in range(mode.starts):
        with BrokerProcess() as broker:
            results.ready_s.append(broker.ready_s)
            results.rss_at_ready_mib.append(proc_memory_mib(broker.pid)["VmRSS"])
    _log(f"start-up: {[round(s, 3) for s in results.ready_s]} s")


def _order(run: int, targets: Sequence[Target]) -> Sequence[Target]:
    return targets if run % 2 == 0 else list(reversed(targets))


def throughput_runs(mode: Mode, runs: int, targets: Sequence[Target], results: Results) -> None:
    for run in range(runs):
        for size in SIZES:
            count = mode.messages[size]
            # generous: 100x the records at a pessimistic 2,000 msg/s
            timeout_s = 60 + count / 2_000
            for target in _order(run, targets):
                topic = f"bench-{size}-r{run}"
                target.create_topic(topic)
                try:
                    prod = produce_run(target, topic, count, size, timeout_s)
                    cons = consume_run(target, topic, CONSUME_WINDOW[size],
                                       mode.consume_passes[size])
                finally:
                    target.delete_topic(topic)
                results.produce.setdefault((target.name, size), []).append(prod)
                results.consume.setdefault((target.name, size), []).append(cons)
                _log(f"run {run + 1}/{runs} {size:>4} B {target.name:>7}: "
                     f"produce {prod.msg_per_s:>9,.0f} msg/s  "
                     f"consume {cons.msg_per_s:>9,.0f} msg/s")


def latency_runs(mode: Mode, runs: int, targets: Sequence[Target], results: Results) -> None:
    for run in range(runs):
        for wait_ms in LATENCY_FETCH_WAITS_MS:
            for target in _order(run, targets):
                topic = f"bench-latency-w{wait_ms}-r{run}"
                target.create_topic(topic)
                try:
                    lat = latency_run(target, topic, mode.latency_s, wait_ms)
                finally:
                    target.delete_topic(topic)
                results.latency.setdefault((target.name, wait_ms), []).append(lat)
                _log(f"run {run + 1}/{runs} latency fetch.wait.max.ms={wait_ms:<3} "
                     f"{target.name:>7}: p50 {lat.p50_ms:.2f} ms p99 {lat.p99_ms:.2f} ms "
                     f"at {lat.achieved_rate:,.0f} msg/s")


def run(mode: Mode, runs: int) -> Results:
    results = Results()
    results.load["before"] = list(os.getloadavg())
    results.pressure["before"] = cpu_pressure()
    measure_startup(mode, results)
    broker = BrokerProcess()
    mock = MockCluster()
    with stopping(broker, mock):
        broker.start()
        mock.start()
        results.memory["at_ready"] = proc_memory_mib(broker.pid)
        time.sleep(1.0)
        results.memory["idle_1s"] = proc_memory_mib(broker.pid)
        odradek = OdradekTarget(broker)
        targets: list[Target] = [odradek, MockTarget(mock)]
        try:
            throughput_runs(mode, runs, targets, results)
            latency_runs(mode, runs, targets, results)
        finally:
            odradek.close()
        time.sleep(2.0)
        results.memory["after_workload"] = proc_memory_mib(broker.pid)
    if broker.killed:
        _log("warning: odradek did not stop on SIGTERM and was killed")
    results.load["after"] = list(os.getloadavg())
    results.pressure["after"] = cpu_pressure()
    return results


# --------------------------------------------------------------------------- report


def _fmt_range(s: Summary, fmt: Callable[[float], str]) -> str:
    return f"{fmt(s.median)} [{fmt(s.lo)}–{fmt(s.hi)}]"


def _verdict(ok: bool) -> str:
    return "meets goal" if ok else "BELOW GOAL"


def report(mode: Mode, runs: int, results: Results) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode.name, "runs": runs, "throughput": [], "latency": {}}
    ck = confluent_kafka.__version__
    lib = confluent_kafka.libversion()[0]
    print()
    print(f"odradek vs librdkafka mock cluster — confluent-kafka {ck}, librdkafka {lib}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"producer: linger.ms=5 batch.size=1048576 batch.num.messages=1000000 acks=1 "
          f"(all: {CLIENT_SETTINGS})")
    print(f"consumer: {CONSUMER_SETTINGS}")
    print(f"1 topic x {PARTITIONS} partitions; median [min–max] of {runs} runs; "
          f"MB = 10^6 B of values; consume reads the newest {CONSUME_WINDOW} records "
          f"per partition, passes {mode.consume_passes}")
    print()
    head = (f"{'phase':<8} {'value':>6} {'records':>9}  {'odradek msg/s':>27}  "
            f"{'mock msg/s':>27}  {'odradek MB/s':>20}  {'mock MB/s':>20}  {'ratio':>5}")
    print(head)
    print("-" * len(head))
    cpu_rows = []
    for phase, table in (("produce", results.produce), ("consume", results.consume)):
        for size in SIZES:
            od, mk = table[("odradek", size)], table[("mock", size)]
            od_msgs = Summary.of([t.msg_per_s for t in od])
            mk_msgs = Summary.of([t.msg_per_s for t in mk])
            od_mb = Summary.of([t.mb_per_s for t in od])
            mk_mb = Summary.of([t.mb_per_s for t in mk])
            ratio = od_msgs.median / mk_msgs.median
            records = od[0].messages
            print(f"{phase:<8} {size:>4} B {records:>9,}  "
                  f"{_fmt_range(od_msgs, lambda v: f'{v:,.0f}'):>27}  "
                  f"{_fmt_range(mk_msgs, lambda v: f'{v:,.0f}'):>27}  "
                  f"{_fmt_range(od_mb, lambda v: f'{v:.1f}'):>20}  "
                  f"{_fmt_range(mk_mb, lambda v: f'{v:.1f}'):>20}  {ratio:>5.2f}")
            od_us = Summary.of([t.server_cpu_us_per_msg for t in od])
            mk_us = Summary.of([t.server_cpu_us_per_msg for t in mk])
            od_pct = Summary.of([t.server_cpu_pct for t in od])
            mk_pct = Summary.of([t.server_cpu_pct for t in mk])
            cpu_rows.append((phase, size, od_us, mk_us, od_pct, mk_pct))
            out["throughput"].append({
                "phase": phase, "value_bytes": size, "records_per_run": records,
                "odradek_msg_per_s": od_msgs.as_dict(), "mock_msg_per_s": mk_msgs.as_dict(),
                "odradek_mb_per_s": od_mb.as_dict(), "mock_mb_per_s": mk_mb.as_dict(),
                "ratio_msg_per_s": ratio,
                "odradek_server_cpu_us_per_msg": od_us.as_dict(),
                "mock_server_cpu_us_per_msg": mk_us.as_dict(),
                "odradek_server_cpu_pct": od_pct.as_dict(),
                "mock_server_cpu_pct": mk_pct.as_dict(),
            })
    print("ratio = odradek msg/s / mock msg/s (medians)")
    print()
    print("server-side CPU: the odradek process, or the mock cluster's threads; "
          "µs per record, and % of one core over the phase")
    head = (f"{'phase':<8} {'value':>6}  {'odradek µs/rec':>20}  {'mock µs/rec':>20}  "
            f"{'odradek/mock':>12}  {'odradek %':>9}  {'mock %':>9}")
    print(head)
    print("-" * len(head))
    for phase, size, od_us, mk_us, od_pct, mk_pct in cpu_rows:
        times = f"{od_us.median / mk_us.median:.1f}x" if mk_us.median > 0 else "-"
        print(f"{phase:<8} {size:>4} B  {_fmt_range(od_us, lambda v: f'{v:.2f}'):>20}  "
              f"{_fmt_range(mk_us, lambda v: f'{v:.2f}'):>20}  {times:>12}  "
              f"{od_pct.median:>8.0f}%  {mk_pct.median:>8.0f}%")

    print()
    print(f"end-to-end latency at {LATENCY_RATE:,} msg/s, {LATENCY_VALUE_BYTES} B values, "
          f"linger.ms={LATENCY_LINGER_MS}, {mode.latency_s:g} s per run, "
          f"median [min–max] of {runs} runs")
    print(f"{'target':<8} {'fetch.wait.max.ms':>17} {'p50 ms':>22} {'p99 ms':>22} "
          f"{'max ms':>8} {'sent msg/s':>10}")
    for (name, wait_ms), lats in sorted(results.latency.items(), key=lambda kv: -kv[0][1]):
        p50 = Summary.of([x.p50_ms for x in lats])
        p99 = Summary.of([x.p99_ms for x in lats])
        worst = max(x.max_ms for x in lats)
        rate = Summary.of([x.achieved_rate for x in lats])
        print(f"{name:<8} {wait_ms:>17} {_fmt_range(p50, lambda v: f'{v:.2f}'):>22} "
              f"{_fmt_range(p99, lambda v: f'{v:.2f}'):>22} {worst:>8.1f} {rate.median:>10,.0f}")
        out["latency"][f"{name} fetch.wait.max.ms={wait_ms}"] = {
            "p50_ms": p50.as_dict(), "p99_ms": p99.as_dict(), "max_ms": worst,
            "sent_msg_per_s": rate.as_dict(), "samples_per_run": lats[0].samples}

    print()
    ready = Summary.of(results.ready_s)
    rss_ready = Summary.of(results.rss_at_ready_mib)
    assert results.python_startup is not None
    py = results.python_startup
    mem = results.memory
    print(f"odradek serve ({' '.join(Path(a).name for a in serve_command()[:2])}), "
          f"{len(results.ready_s)} starts:")
    print(f"  time to ready    {_fmt_range(ready, lambda v: f'{v:.3f}')} s   "
          f"goal ≤ {GOAL_READY_S} s: {_verdict(ready.median <= GOAL_READY_S)}   "
          f"(python -c pass: {py.median:.3f} s)")
    print(f"  RSS at ready     {_fmt_range(rss_ready, lambda v: f'{v:.1f}')} MiB")
    print(f"  RSS idle 1 s     {mem['idle_1s']['VmRSS']:.1f} MiB   "
          f"goal ≤ {GOAL_IDLE_RSS_MIB:g} MB: "
          f"{_verdict(mem['idle_1s']['VmRSS'] * 1.048576 <= GOAL_IDLE_RSS_MIB)}")
    print(f"  RSS after load   {mem['after_workload']['VmRSS']:.1f} MiB (2 s idle after the "
          f"workload; peak VmHWM {mem['after_workload']['VmHWM']:.1f} MiB)")

    print()
    ratios = {f"{t['phase']} {t['value_bytes']} B": t["ratio_msg_per_s"]
              for t in out["throughput"]}
    below = [k for k, v in ratios.items() if v < GOAL_THROUGHPUT_RATIO]
    print(f"throughput goal ≥ {GOAL_THROUGHPUT_RATIO}x mock: "
          + ("met everywhere" if not below else "BELOW GOAL for " + ", ".join(below)))
    print(f"shared machine: load average before {results.load['before'][0]:.2f}, "
          f"after {results.load['after'][0]:.2f}; /proc/pressure/cpu before "
          f"'{results.pressure['before']}', after '{results.pressure['after']}'")
    out["startup"] = {"ready_s": ready.as_dict(), "rss_at_ready_mib": rss_ready.as_dict(),
                      "python_startup_s": py.as_dict(), "command": serve_command()}
    out["memory_mib"] = mem
    out["load_average"] = results.load
    out["cpu_pressure"] = results.pressure
    out["client_settings"] = CLIENT_SETTINGS
    out["consumer_settings"] = CONSUMER_SETTINGS
    out["versions"] = {"confluent_kafka": ck, "librdkafka": lib,
                       "python": platform.python_version()}
    out["goals"] = {"throughput_ratio": GOAL_THROUGHPUT_RATIO, "ready_s": GOAL_READY_S,
                    "idle_rss_mb": GOAL_IDLE_RSS_MIB}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts, under a minute")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (>= 3)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write figures as JSON")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    mode = QUICK if args.quick else DEFAULT
    raise_on_sigterm()
    t0 = time.monotonic()
    results = run(mode, args.runs)
    out = report(mode, args.runs, results)
    out["wall_s"] = time.monotonic() - t0
    print(f"total wall time {out['wall_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())

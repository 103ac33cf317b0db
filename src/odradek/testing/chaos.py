"""A Jepsen-like chaos harness for a replicated Odradek cluster.

``ChaosRun(seed, rounds, faults).run()`` starts a 3-node cluster
(:class:`~odradek.testing.cluster.LocalCluster`, every link through a proxy),
creates a topic of 3 partitions with replication factor 3 and
``min.insync.replicas=2`` (and a second one for transactions), and runs real
clients (confluent-kafka) in threads while it injects faults:

- idempotent ``acks=all`` producers, each record value unique
  (``<producer>-<seq>``), partition ``seq % 3``; every acknowledgement is
  recorded as (partition, offset, value, time);
- an ``assign()`` consumer reading every partition from offset 0 all along;
- one consumer group (subscribed, created before the first fault) that
  commits its position every second, recording every commit the coordinator
  acknowledged;
- a transactional producer writing one record to each partition of
  ``chaos-txn`` per transaction, committing two in three and aborting the
  third, recording each outcome;
- a poller of each partition's high watermark (ListOffsets).

The fault kinds, their schedule and the checks of the history are in
:mod:`odradek.testing.chaos_model`. After each heal the run waits until every
partition of every topic has its full ISR again (asked of every broker) and
every partition acknowledges again; that time, from the fault, is the fault's
time to recovery. At the end the producers are flushed, the consumers
drained, everything is read back from offset 0 (``chaos-txn`` with
read_committed), the data directories are searched for ``-stray``
directories, and the history is checked. The seed fixes the fault schedule
(kinds, order, targets, holds, delays); the same seed gives the same schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import tempfile
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from odradek.client.client import KafkaClient
from odradek.client.connection import Connection
from odradek.testing.chaos_model import (
    ALL_KINDS,
    KINDS,
    NODES,
    PARTITIONS,
    SESSION_TIMEOUT_MS,
    TOPIC,
    TXN_TOPIC,
    Acked,
    ChaosReport,
    Fault,
    History,
    Injected,
    check_history,
    record_of,
    save_history,
    schedule,
)
from odradek.testing.cluster import LocalCluster, wait_for
from odradek.wire.messages import describe_quorum_request as dq

__all__ = ["ALL_KINDS", "KINDS", "ChaosError", "ChaosReport", "ChaosRun", "schedule"]

OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}

DELAY_FILE = "fsync-delay-ms"


MAX_MEMBER_REPLACEMENTS = 3
"""How many times the group's member may be replaced after a commit went
unanswered for 30 s (see ChaosRun._group_loop)."""


class _RingHandler(logging.Handler):
    """Keeps the last lines logged to it (a ``deque`` with a ``maxlen``)."""

    def __init__(self, ring: deque[str]) -> None:
        super().__init__()
        self.ring = ring

    def emit(self, record: logging.LogRecord) -> None:
        self.ring.append(f"{record.created:.3f} {record.getMessage()}")


class ChaosError(Exception):
    """The run could not go on (the cluster did not start or recover in time)."""


# -- the run ----------------------------------------------------------------------------


class ChaosRun:
    """One cluster, clients in threads, ``rounds`` faults of each kind; see the module."""

    def __init__(self, seed: int, rounds: int = 5, faults: Iterable[str] = KINDS,
                 directory: Path | None = None, producers: int = 2, rate: float = 60.0,
                 log: Callable[[str], None] | None = None, max_in_flight: int = 5) -> None:
        faults = list(faults)
        unknown = [f for f in faults if f not in ALL_KINDS]
        if unknown:
            raise ValueError(f"unknown fault {unknown[0]!r} (known: {', '.join(ALL_KINDS)})")
        self.seed = seed
        self.schedule = schedule(seed, rounds, faults)
        self.directory = directory or Path(tempfile.mkdtemp(prefix="odradek-chaos-"))
        self.producers = producers
        self.rate = rate
        """Records per second of each producer."""
        self.max_in_flight = max_in_flight
        """The idempotent producers' ``max.in.flight.requests.per.connection``
        (librdkafka's default 5). With 1 a request is always head-of-line, so
        librdkafka never bumps its epoch on an OUT_OF_ORDER answer to a
        pipelined request, which renumbers unacknowledged records that may be
        written already (docs/durability.md, "Idempotence across full-cluster
        restarts")."""
        self.log = log or (lambda line: print(line, flush=True))
        self.history = History()
        self.cluster: LocalCluster | None = None
        self._stop_producing = threading.Event()
        self._stop_reading = threading.Event()
        self._tail_until: dict[int, int] | None = None
        self._threads: list[threading.Thread] = []
        self._admin: Any = None
        self._group_debug: deque[str] = deque(maxlen=300)

    # -- life cycle -------------------------------------------------------------------

    def run(self) -> ChaosReport:
        t0 = time.monotonic()
        self.log(f"chaos: seed {self.seed}, {len(self.schedule)} faults, "
                 f"cluster in {self.directory}")
        self.directory.mkdir(parents=True, exist_ok=True)
        cluster = self.cluster = LocalCluster(self.directory, NODES, overrides=OVERRIDES,
                                              links=True)
        for node in cluster.nodes.values():
            node.env["ODRADEK_TEST_FSYNC_DELAY_FILE"] = str(node.directory / DELAY_FILE)
        try:
            cluster.format()
            cluster.start()
            self._setup()
            for i, fault in enumerate(self.schedule, 1):
                self._round(i, fault)
            self._finish()
        finally:
            self._stop_producing.set()
            self._stop_reading.set()
            for t in self._threads:
                t.join(30)
            cluster.stop()
        self._scan_logs()
        self.history.strays = sorted(str(p) for p in self.directory.rglob("*-stray"))
        save_history(self.history, self.directory / "history.pickle")
        checks = check_history(self.history)
        return ChaosReport(self.seed, self.history, checks, time.monotonic() - t0,
                           self.directory)

    def _setup(self) -> None:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        assert self.cluster is not None
        self._admin = AdminClient(self._conf())

        def created() -> bool:
            fs = self._admin.create_topics([NewTopic(TOPIC, PARTITIONS, NODES),
                                            NewTopic(TXN_TOPIC, PARTITIONS, NODES)])
            for f in fs.values():
                try:
                    f.result(10)
                except Exception as exc:
                    if "already exists" not in str(exc):
                        raise
            return True
        self._wait("the topics created", created, 60, 0.5)
        self._wait_full_isr("the topic's replicas in sync", 60)
        self._spawn(self._tail_loop, "chaos-tail")
        self._spawn(self._hw_loop, "chaos-hw")
        for i in range(self.producers):
            self._spawn(functools.partial(self._produce_loop, i), f"chaos-producer-{i}")
        self._wait("acknowledgements on every partition", lambda: len(
            {a.partition for a in self.history.acked}) == PARTITIONS, 60, 0.2)
        self._spawn(self._group_loop, "chaos-group")
        self._wait("the consumer group's first commit (and __consumer_offsets)",
                   lambda: bool(self.history.commits), 60, 0.2)
        self._spawn(self._ctp_loop, "chaos-ctp")
        self._wait("the first committed transaction (and __transaction_state)",
                   lambda: bool(self.history.txn_committed), 60, 0.2)
        self._wait_full_isr("every replica in sync before the first fault", 60)
        self.log(f"chaos: {self.producers} producers, 2 consumers, 1 group, 1 "
                 f"consume-transform-produce loop running")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _round(self, i: int, fault: Fault) -> None:
        cluster = self.cluster
        assert cluster is not None
        time.sleep(fault.settle_s)
        if fault.kind in ("controller", "ctlbroker"):
            node = self._active_controller()
        elif fault.kind in ("restart", "restart9", "rolling"):
            node = 0  # every node
        else:
            node = self._leader(fault.partition)
        done = Injected(fault, node, time.monotonic())
        self.history.faults.append(done)
        self.log(f"chaos: round {i}/{len(self.schedule)}: {fault.describe()}"
                 + (f" (node {node})" if node else ""))
        if fault.kind in ("kill", "controller"):
            cluster.kill(node)
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.start(node)
        elif fault.kind == "pause":
            cluster.pause(node)
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.resume(node)
        elif fault.kind == "isolate":
            cluster.isolate(node)
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.heal()
        elif fault.kind in ("restart", "restart9"):
            cluster.stop_all(clean=fault.kind == "restart")
            self.log(f"chaos:   every node stopped {time.monotonic() - done.start:.1f} s "
                     f"after the signal")
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.start()
        elif fault.kind == "rolling":
            for n in sorted(cluster.nodes):
                code = cluster.terminate(n)
                if code != 0:
                    raise ChaosError(f"node {n} exited {code} on SIGTERM in a rolling restart")
                time.sleep(fault.hold_s)
                cluster.start(n)
                self._wait_full_isr(f"full ISRs after node {n}'s restart in round {i}", 90)
            done.healed = time.monotonic()
        elif fault.kind == "ctlbroker":
            other = self._leader(fault.partition)
            if other == node:
                other = sorted(cluster.nodes)[node % NODES]
            self.log(f"chaos:   with node {other}")
            cluster.kill(node)
            cluster.kill(other)
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.start(node)
            cluster.start(other)
        elif fault.kind == "wipe":
            cluster.kill(node)
            cluster.wipe(node)
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            cluster.start(node)
        elif fault.kind == "slowdisk":
            delay_file = cluster.nodes[node].directory / DELAY_FILE
            self._topic_config("flush.messages", "1")
            delay_file.write_text(str(fault.delay_ms))
            time.sleep(fault.hold_s)
            done.healed = time.monotonic()
            delay_file.write_text("0")
            self._topic_config("flush.messages", None)
        what = f"round {i} ({fault.describe()}, node {node})"
        self._wait(f"an acknowledgement on every partition after {what}",
                   lambda: self._acked_since(done.healed), 90, 0.1)
        self._wait_full_isr(f"full ISRs again after {what}", 90)
        done.recovered = time.monotonic()
        done.gap_s, done.gap_partition = self._gap(done.start, done.recovered)
        self.log(f"chaos:   recovered {done.recovered - done.start:.1f} s after the "
                 f"fault; longest gap {done.gap_s:.1f} s ({TOPIC}-{done.gap_partition})")

    def _finish(self) -> None:
        h = self.history
        time.sleep(0.5)
        self._stop_producing.set()
        for t in self._threads:
            if t.name.startswith("chaos-producer"):
                t.join(90)
        hw = self._wait("the final high watermarks", self._final_hw, 30, 0.5)
        h.final_hw = hw
        self._tail_until = dict(hw)
        # Each drains up to the final HWs. The consume-transform-produce loop is
        # given less: its end is checked up to where it committed (a client hang
        # such as librdkafka #5511, see _ctp_loop, must not stall the report).
        for name, wait_s in (("chaos-tail", 120), ("chaos-group", 120), ("chaos-ctp", 30)):
            thread = next(t for t in self._threads if t.name == name)
            thread.join(wait_s)
            if thread.is_alive():
                self._log_stuck(thread, wait_s)
        self._stop_reading.set()
        for t in self._threads:
            t.join(30)
        h.final = self._read_all(hw)
        h.txn_read = self._read_committed(TXN_TOPIC)
        h.ctp_committed = self._committed_of("chaos-ctp")
        self.log(f"chaos: {len(h.acked)} acknowledged, {len(h.final)} read back; "
                 f"{len(h.txn_committed)} transactions committed, {len(h.txn_read)} "
                 f"transactional records read back")

    def _log_stuck(self, thread: threading.Thread, wait_s: float) -> None:
        """A client thread that did not drain in time: say where it is."""
        import sys
        import traceback

        frame = sys._current_frames().get(thread.ident or -1)
        where = "".join(traceback.format_stack(frame)[-4:]) if frame else "(gone)"
        self.log(f"chaos: {thread.name} did not drain in {wait_s:g} s; it is at:\n{where}")
        if thread.name == "chaos-group":
            self.log(f"chaos: the group as the cluster describes it: {self._describe_group()}")
            self.log("chaos: the group member's last librdkafka cgrp debug lines:\n"
                     + "\n".join(self._group_debug))

    def _describe_group(self) -> str:
        try:
            assert self._admin is not None
            [(_, fut)] = self._admin.describe_consumer_groups(["chaos-group"]).items()
            g = fut.result(10)
            members = [(m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                       for m in g.members]
            return f"state {g.state}, coordinator {g.coordinator.id}, members {members}"
        except Exception as exc:  # a diagnosis must not hide the failure it explains
            return f"(describe failed: {exc})"

    # -- clients ----------------------------------------------------------------------

    def _client_error(self, err: Any) -> None:
        self.history.client_errors[err.name()] += 1

    def _conf(self, **extra: Any) -> Any:
        assert self.cluster is not None
        return {"bootstrap.servers": self.cluster.bootstrap, "log_level": 0,
                "error_cb": self._client_error, **extra}

    def _produce_loop(self, index: int) -> None:
        """One idempotent producer; a fatal error (which librdkafka raises from
        poll() too) is recorded and the producer replaced by a new one with a new
        name (``p0.1``, ...), so values stay unique and traffic goes on."""
        from confluent_kafka import KafkaException, Producer

        h = self.history
        incarnation = 0
        while not self._stop_producing.is_set():
            name = f"p{index}" if not incarnation else f"p{index}.{incarnation}"
            fatal: list[str] = []

            def on_error(err: Any, fatal: list[str] = fatal) -> None:
                self._client_error(err)
                if err.fatal():
                    fatal.append(err.str())

            producer = Producer(self._conf(**{
                "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                "max.in.flight.requests.per.connection": self.max_in_flight,
                "request.timeout.ms": 5000, "message.timeout.ms": 120000,
                "retry.backoff.ms": 100, "error_cb": on_error}))
            seq = 0

            def delivered(err: Any, msg: Any, name: str = name) -> None:
                if err is not None:
                    h.produce_errors[err.name()] += 1
                    return
                value = msg.value().decode()
                offset = msg.offset()
                h.acked.append(Acked(name, int(value.rsplit("-", 1)[1]), msg.partition(),
                                     -1 if offset is None else int(offset), value,
                                     time.monotonic()))

            due = time.monotonic()
            try:
                while not self._stop_producing.is_set() and not fatal:
                    value = f"{name}-{seq}"
                    try:
                        producer.produce(TOPIC, value=value.encode(),
                                         partition=seq % PARTITIONS, on_delivery=delivered)
                    except BufferError:
                        producer.poll(0.1)
                        continue
                    except KafkaException as exc:
                        # Refused before it was queued (e.g. _UNKNOWN_TOPIC while a
                        # restarted node replays metadata): counted, and tried again.
                        if exc.args[0].fatal():
                            raise
                        h.produce_errors[exc.args[0].name()] += 1
                        producer.poll(0.1)
                        continue
                    seq += 1
                    due += 1 / self.rate
                    producer.poll(max(0.0, due - time.monotonic()))
                h.unresolved += producer.flush(60)
            except KafkaException as exc:
                if not exc.args[0].fatal():
                    raise
                fatal.append(exc.args[0].str())
            if fatal:
                h.fatal_errors.append((time.monotonic(), name, fatal[0]))
                with contextlib.suppress(KafkaException):
                    h.unresolved += producer.flush(5)
            incarnation += 1

    def _ctp_loop(self) -> None:
        """Consume-transform-produce, exactly once: a member of group
        ``chaos-ctp`` reads ``TOPIC`` (read_committed) and, per transaction,
        writes each record it read to ``TXN_TOPIC`` (same partition, value
        ``tx<incarnation>-<n>-<i>|<source value>``) and commits its position with
        send_offsets_to_transaction; every third transaction is aborted and the
        member goes back to its committed offsets. Calls are retried while their
        error is retriable, as librdkafka asks; an error that asks for an abort
        aborts; a fatal one is recorded and the producer replaced. Once the final
        high watermarks are known it drains ``TOPIC`` up to them."""
        from confluent_kafka import Consumer, KafkaException, Producer

        h = self.history
        consumer = Consumer(self._conf(**{
            "group.id": "chaos-ctp", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "fetch.wait.max.ms": 100}))
        consumer.subscribe([TOPIC])
        n = incarnation = 0
        try:
            while not self._stop_reading.is_set():
                # A transaction may span several faults (a whole-cluster restart
                # takes ~10 s each): 5 minutes, so the coordinator's timeout abort
                # (which fences the producer, as Kafka's does) is not what is tested.
                # No re-bootstrap (KIP-899): when every node is down at once
                # librdkafka decommissions the brokers it knew, and a group
                # coordinator cached on a decommissioned broker makes
                # send_offsets_to_transaction hang past its timeout
                # (librdkafka issue #5511, open in 2.16; seen here after every
                # full restart until this was set).
                producer = Producer(self._conf(**{
                    "transactional.id": "chaos-ctp", "transaction.timeout.ms": 300000,
                    "message.timeout.ms": 60000, "metadata.recovery.strategy": "none"}))
                open_txn = -1
                try:
                    producer.init_transactions(120)
                    if incarnation:
                        # Only now: init_transactions returns once the previous
                        # instance's last transaction is complete, so the group's
                        # committed offsets include it (else its input would be
                        # transformed twice).
                        _rewind(consumer)
                    while not self._stop_reading.is_set():
                        msgs = [m for m in consumer.consume(1000, 0.3) if m.error() is None]
                        if not msgs:
                            if self._ctp_drained(consumer):
                                return
                            continue
                        producer.begin_transaction()
                        open_txn = n
                        for i, m in enumerate(msgs):
                            value = f"tx{incarnation}-{n}-{i}|{bytes(m.value() or b'').decode()}"
                            producer.produce(TXN_TOPIC, value.encode(),
                                             partition=int(m.partition() or 0))
                        positions = [tp for tp in consumer.position(consumer.assignment())
                                     if tp.offset >= 0]
                        commit = n % 3 != 2 and _send_offsets(producer, consumer, positions,
                                                              h.client_errors)
                        if not commit:
                            # Delivered first, so the transaction is registered with
                            # its coordinator before it is aborted (an abort racing
                            # its own AddPartitionsToTxn may meet the previous
                            # transaction still being completed).
                            producer.flush(30)
                        commit = _end_transaction(producer, commit, h.client_errors)
                        (h.txn_committed if commit else h.txn_aborted).append(n)
                        h.txn_sizes[n] = len(msgs)
                        open_txn = -1
                        if not commit:
                            _rewind(consumer)
                        n += 1
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.fatal():
                        h.txn_fatal.append((time.monotonic(), str(err)))
                    else:  # an error librdkafka does not ask to retry or abort for
                        h.client_errors[f"ctp {err.name()}"] += 1
                    if open_txn >= 0:
                        h.txn_undecided.append(open_txn)
                        n += 1
                    incarnation += 1
                finally:
                    with contextlib.suppress(Exception):
                        producer.flush(5)
        finally:
            consumer.close()

    def _committed_of(self, group: str) -> dict[int, int]:
        """A group's committed offsets of ``TOPIC`` (asked again while the
        coordinator is not ready)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(self._conf(**{"group.id": group,
                                          "isolation.level": "read_committed"}))
        try:
            def ask() -> dict[int, int] | None:
                try:
                    got = consumer.committed([TopicPartition(TOPIC, p)
                                              for p in range(PARTITIONS)], timeout=10)
                except KafkaException:
                    return None
                return {tp.partition: max(tp.offset, 0) for tp in got}
            return dict(self._wait(f"{group}'s committed offsets", ask, 60, 0.5))
        finally:
            consumer.close()

    def _ctp_drained(self, consumer: Any) -> bool:
        """Has the consume-transform-produce group committed up to the final HWs?"""
        from confluent_kafka import KafkaException, TopicPartition

        until = self._tail_until
        if until is None:
            return False
        try:
            got = consumer.committed([TopicPartition(TOPIC, p) for p in until], timeout=5)
        except KafkaException:
            return False
        return all(tp.offset >= until[tp.partition] for tp in got)

    def _read_committed(self, topic: str) -> list[tuple[int, int, str]]:
        """Everything a read_committed consumer reads of ``topic`` up to its end."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._conf(**{
            "group.id": "chaos-final-txn", "enable.auto.commit": False,
            "isolation.level": "read_committed"}))
        ends = {}
        for p in range(PARTITIONS):
            got = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = got[1] if got else 0
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                for m in consumer.consume(1000, 0.5):
                    if m.error() is None:
                        out.append(record_of(m))
                positions = consumer.position([TopicPartition(topic, p)
                                               for p in range(PARTITIONS)])
                if all(tp.offset >= ends[tp.partition] for tp in positions):
                    return out
            raise ChaosError(f"the read_committed read of {topic} stopped short of {ends}")
        finally:
            consumer.close()

    def _tail_loop(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._conf(**{
            "group.id": "chaos-tail", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "fetch.wait.max.ms": 100}))
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        out = self.history.tailed
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        try:
            while not self._stop_reading.is_set():
                until = self._tail_until
                if until is not None and all(next_offset[p] >= until[p] for p in until):
                    return
                for m in consumer.consume(1000, 0.2):
                    if m.error() is None:
                        p, o, _ = record = record_of(m)
                        out.append(record)
                        next_offset[p] = o + 1
        finally:
            consumer.close()

    def _group_loop(self) -> None:
        """The group's member: consumes, commits asynchronously every second (one
        commit outstanding at most, so a commit that is never answered shows as
        commits stopping, not as a stuck thread), and drains up to the final HWs.

        A member whose commit goes unanswered for 30 s is replaced by a new one
        (at most :data:`MAX_MEMBER_REPLACEMENTS` times), as an application would
        restart a stuck consumer: CI once saw librdkafka's classic member stop
        consuming with a commit outstanding, which no broker-side trace could be
        found for. A stall the cluster causes stalls the new member too, and the
        check of the final committed offsets still fails; each replacement is
        reported with the old member's last group-protocol debug lines."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        h = self.history
        sent = [0.0]  # when the outstanding commit was sent; 0: none outstanding
        generation = [0]  # the current member; a replaced member's callbacks are ignored

        def event(what: str) -> None:
            h.group_events.append((time.monotonic(), what))

        def on_commit(member: int, err: Any, partitions: Any) -> None:
            if member != generation[0]:
                return
            sent[0] = 0.0
            now = time.monotonic()
            if err is not None:
                h.client_errors[f"commit {err.name()}"] += 1
                if err.name() != "_NO_OFFSET":
                    event(f"commit failed: {err.name()}")
            for tp in partitions or ():
                if tp.error is None and tp.offset >= 0:
                    h.commits.append((now, tp.partition, tp.offset))

        # The member's group-protocol debug lines, the last few hundred.
        debug = logging.getLogger("odradek.chaos.group-member")
        debug.propagate = False
        debug.setLevel(logging.DEBUG)
        debug.handlers[:] = [_RingHandler(self._group_debug)]

        def new_member() -> Any:
            member = generation[0]
            c = Consumer(self._conf(**{
                "group.id": "chaos-group", "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100,
                "on_commit": lambda err, ps: on_commit(member, err, ps),
                "debug": "cgrp", "logger": debug, "log_level": 7}))
            c.subscribe([TOPIC],
                        on_assign=lambda _, ps: event(f"assigned {len(ps)} partitions"),
                        on_revoke=lambda _, ps: event(f"revoked {len(ps)} partitions"))
            return c

        consumer = new_member()
        next_offset = dict.fromkeys(range(PARTITIONS), 0)

        def commit() -> None:
            try:
                consumer.commit(asynchronous=True)
            except KafkaException as exc:
                h.client_errors[f"commit {exc.args[0].name()}"] += 1
                return
            sent[0] = time.monotonic()

        def consume(timeout_s: float) -> None:
            for m in consumer.consume(1000, timeout_s):
                if m.error() is None:
                    p, o, _ = record = record_of(m)
                    h.grouped.append(record)
                    next_offset[p] = max(next_offset[p], o + 1)

        def replace() -> Any:
            """A new member; the stuck one is closed on a thread of its own (its
            close may wait on the very commit that is stuck)."""
            event("a commit unanswered for 30 s: the member was replaced")
            self.log("chaos: the group member's commit went unanswered for 30 s; replacing "
                     "it. Its last librdkafka cgrp debug lines:\n"
                     + "\n".join(list(self._group_debug)[-60:]))
            old = consumer
            threading.Thread(target=old.close, name="chaos-group-close", daemon=True).start()
            generation[0] += 1
            sent[0] = 0.0
            return new_member()

        try:
            last_commit, replaced, warned = time.monotonic(), 0, False
            while not self._stop_reading.is_set():
                until = self._tail_until
                if until is not None and all(next_offset[p] >= until[p] for p in until):
                    break
                consume(0.2)
                now = time.monotonic()
                if sent[0] and now - sent[0] > 30:
                    if replaced < MAX_MEMBER_REPLACEMENTS:
                        consumer = replace()
                        replaced += 1
                        last_commit = now
                    elif not warned:
                        event("a commit unanswered for 30 s")
                        warned = True
                if not sent[0] and now - last_commit >= 1.0:
                    commit()
                    last_commit, warned = now, False
            # The last commit, once the one outstanding (if any) is answered.
            deadline = time.monotonic() + 30
            while sent[0] and time.monotonic() < deadline:
                consume(0.1)
            commit()
            while sent[0] and time.monotonic() < deadline:
                consume(0.1)
            with contextlib.suppress(KafkaException):
                for tp in consumer.committed(
                        [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10):
                    if tp.error is None and tp.offset >= 0:
                        h.final_committed[tp.partition] = tp.offset
        finally:
            consumer.close()

    def _hw_loop(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(self._conf(**{"group.id": "chaos-hw"}))
        try:
            while not self._stop_reading.is_set():
                for p in range(PARTITIONS):
                    try:
                        got = consumer.get_watermark_offsets(TopicPartition(TOPIC, p),
                                                             timeout=2, cached=False)
                    except KafkaException:
                        continue
                    if got is not None:
                        self.history.hws.append((time.monotonic(), p, got[1]))
                self._stop_reading.wait(0.3)
        finally:
            consumer.close()

    def _final_hw(self) -> dict[int, int] | None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._conf(**{"group.id": "chaos-hw-final"}))
        try:
            out = {}
            for p in range(PARTITIONS):
                got = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)
                if got is None:
                    return None
                out[p] = got[1]
                self.history.hws.append((time.monotonic(), p, got[1]))
            return out
        finally:
            consumer.close()

    def _read_all(self, hw: dict[int, int]) -> list[tuple[int, int, str]]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._conf(**{
            "group.id": "chaos-final", "enable.auto.commit": False,
            "enable.auto.offset.store": False}))
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        out: list[tuple[int, int, str]] = []
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + 60
        try:
            while any(next_offset[p] < hw[p] for p in hw):
                if time.monotonic() > deadline:
                    raise ChaosError(f"the final read stopped at {next_offset}, short of the "
                                     f"high watermarks {hw}")
                for m in consumer.consume(1000, 0.5):
                    if m.error() is None:
                        p, o, _ = record = record_of(m)
                        out.append(record)
                        next_offset[p] = o + 1
        finally:
            consumer.close()
        return out

    def _topic_config(self, name: str, value: str | None) -> None:
        # confluent_kafka.admin re-exports these without declaring it (mypy --strict).
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])

        def altered() -> bool:
            self._admin.incremental_alter_configs([resource])[resource].result(10)
            return True
        self._wait(f"{TOPIC} altered ({name}={value})", altered, 60, 0.5)

    # -- the cluster, asked directly -----------------------------------------------------

    def _metadata(self) -> dict[int, Any]:
        """node id -> its Metadata answer (every topic), for each node that answers."""
        assert self.cluster is not None

        async def ask(address: str) -> Any:
            client = await KafkaClient.connect(address, "odradek-chaos")
            try:
                return await asyncio.wait_for(client.metadata(None), 5)
            finally:
                await client.close()

        out = {}
        for node in self.cluster.brokers:
            if node.alive:
                with contextlib.suppress(Exception):
                    out[node.node_id] = asyncio.run(ask(node.address))
        return out

    def _leader(self, partition: int) -> int:
        def find() -> int | None:
            best: tuple[int, int] | None = None
            for resp in self._metadata().values():
                for t in resp.topics:
                    for p in t.partitions if t.name == TOPIC else ():
                        if p.partition_index == partition and p.leader_id >= 0 and (
                                best is None or p.leader_epoch > best[0]):
                            best = (p.leader_epoch, p.leader_id)
            return None if best is None else best[1]
        return int(self._wait(f"a leader of {TOPIC}-{partition}", find, 60, 0.2))

    def _active_controller(self) -> int:
        assert self.cluster is not None
        request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata",
                                                         [dq.PartitionData(0)])])

        async def ask(address: str) -> Any:
            conn = await Connection.open(address, "odradek-chaos", timeout_s=5)
            try:
                return await asyncio.wait_for(conn.request(request, 1), 5)
            finally:
                await conn.close()

        def find() -> int | None:
            leaders = set()
            for node in self.cluster.nodes.values() if self.cluster else ():
                if node.alive and node.controller_port:
                    try:
                        resp = asyncio.run(ask(f"127.0.0.1:{node.controller_port}"))
                        part = resp.topics[0].partitions[0]
                    except Exception:
                        continue
                    if resp.error_code == 0 and part.error_code == 0 and part.leader_id >= 0:
                        leaders.add((part.leader_epoch, part.leader_id))
            return max(leaders)[1] if leaders else None
        return int(self._wait("the active controller", find, 60, 0.2))

    def _full_isr(self) -> bool:
        views = self._metadata()
        if len(views) < NODES:
            return False
        for resp in views.values():
            if len(resp.brokers) < NODES:
                return False
            names = {t.name for t in resp.topics}
            if TOPIC not in names:
                return False
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code or p.leader_id < 0 or \
                            sorted(p.isr_nodes) != sorted(p.replica_nodes):
                        return False
        return True

    def _acked_since(self, t: float) -> bool:
        seen = set()
        for a in reversed(self.history.acked):
            if a.at < t:
                break
            seen.add(a.partition)
        return len(seen) == PARTITIONS

    def _wait_full_isr(self, what: str, timeout_s: float) -> None:
        self._wait(what, self._full_isr, timeout_s, 0.25)

    def _wait(self, what: str, check: Callable[[], Any], timeout_s: float,
              interval_s: float) -> Any:
        try:
            return wait_for(what, check, timeout_s, interval_s)
        except AssertionError as exc:
            raise ChaosError(f"{exc} (seed {self.seed}; nodes' logs under "
                             f"{self.directory})") from None

    def _gap(self, start: float, end: float) -> tuple[float, int]:
        """The longest time within [start, end] one partition had no acknowledgement."""
        times: dict[int, list[float]] = defaultdict(list)
        for a in self.history.acked:
            if start <= a.at <= end:
                times[a.partition].append(a.at)
        best = (0.0, -1)
        for p in range(PARTITIONS):
            points = [start, *sorted(times[p]), end]
            gap = max(b - a for a, b in itertools.pairwise(points))
            best = max(best, (gap, p))
        return best

    def _scan_logs(self) -> None:
        if self.cluster is None:
            return
        for node in self.cluster.nodes.values():
            text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
            at = text.find("Traceback")
            if at >= 0:
                self.history.tracebacks[node.node_id] = text[max(0, at - 300):at + 3000]


def _retrying(call: Callable[[], bool], what: str, seen: Counter[str]) -> bool:
    """``call()`` again while it fails with a retriable error; False when the
    error asks for the transaction to be aborted. Each error is counted in
    ``seen`` as ``<what> <error>``."""
    from confluent_kafka import KafkaException

    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            seen[f"{what} {err.name()}" + (" (abort)" if err.txn_requires_abort() else "")] += 1
            if err.fatal():
                raise
            if err.txn_requires_abort():
                return False
            if not err.retriable():
                raise


def _send_offsets(producer: Any, consumer: Any, positions: list[Any],
                  seen: Counter[str]) -> bool:
    """send_offsets_to_transaction, retried; False if the transaction must abort."""
    def call() -> bool:
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
        return True
    return _retrying(call, "ctp send_offsets", seen)


def _end_transaction(producer: Any, commit: bool, seen: Counter[str]) -> bool:
    """Commit (or abort) the open transaction; True if it was committed."""
    def end(committing: bool) -> bool:
        (producer.commit_transaction if committing else producer.abort_transaction)(120)
        return True
    if commit and _retrying(lambda: end(True), "ctp commit", seen):
        return True
    _retrying(lambda: end(False), "ctp abort", seen)
    return False


def _rewind(consumer: Any) -> None:
    """Back to the group's committed offsets (after an abort); asking for them is
    retried while the coordinator moves (NOT_COORDINATOR and the like)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

    deadline = time.monotonic() + 120
    while True:
        assignment = consumer.assignment()
        if not assignment:
            return
        try:
            committed = consumer.committed(assignment, timeout=30)
            break
        except KafkaException as exc:
            if exc.args[0].fatal() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for tp in committed:
        consumer.seek(TopicPartition(tp.topic, tp.partition,
                                     tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

"""Coordinators answer only from committed state, across a network partition.

Three real nodes, every link through a proxy. One node leads both the
``__consumer_offsets`` partition of a group and the ``__transaction_state``
partition of a transactional id; it is cut off from the other two (clients
still reach it) for longer than the broker session, then the links heal.
Meanwhile a group member commits offsets, a reader polls them with
OffsetFetch, and a transactional producer commits and aborts transactions.

Before the fix the cut-off node accepted commits it could not replicate and
OffsetFetch answered from them: the reader saw offsets that went back when the
partition healed (a dirty read), and a transactional producer got a fatal
INVALID_TXN_STATE. Now: the offsets read never go back, no producer gets a
fatal error, and read_committed sees every committed transaction whole and no
aborted record.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from tests.support.cluster import LocalCluster, wait_for
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(300)

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}


def coordinator_of(cluster: LocalCluster, key: str, key_type: int) -> int:
    def ask() -> int | None:
        raw = RawClient(cluster.bootstrap)
        try:
            resp = raw.request(FindCoordinatorRequest(key_type=key_type,
                                                      coordinator_keys=[key]), 4)
        finally:
            raw.close()
        c = resp.coordinators[0]
        return int(c.node_id) if c.error_code == 0 else None
    return wait_for(f"the coordinator of {key}", ask, 60, 0.2)


def test_an_isolated_coordinator_never_shows_uncommitted_state(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides=OVERRIDES, links=True)
    cluster.format()
    cluster.start()
    stop = threading.Event()
    failures: list[str] = []
    acked: list[int] = []
    read: list[int] = []
    committed_txns: list[int] = []
    aborted_txns: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name in ("src", "out"):
            wait_for(f"{name} created", lambda n=name: admin.create_topics(
                [NewTopic(n, 1, 3)])[n].result(20) is None, 60, 0.5)
        # A group and a transactional id coordinated by the same node.
        coordinator_of(cluster, "g-warm", 0)
        target = coordinator_of(cluster, "t-0", 1)
        group = next(g for g in (f"g-{i}" for i in range(200))
                     if coordinator_of(cluster, g, 0) == target)
        tid = "t-0"

        def committer() -> None:
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                          "enable.auto.commit": False, "log_level": 0})
            offset = 0
            while not stop.is_set():
                offset += 1
                try:
                    c.commit(offsets=[TopicPartition("src", 0, offset)], asynchronous=False)
                    acked.append(offset)
                except KafkaException:
                    pass  # not acknowledged: retried with the next offset
                time.sleep(0.05)
            c.close()

        def reader() -> None:
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                          "log_level": 0})
            while not stop.is_set():
                try:
                    got = c.committed([TopicPartition("src", 0)], timeout=5)[0].offset
                except KafkaException:
                    continue
                if got >= 0:
                    if read and got < read[-1]:
                        failures.append(f"OffsetFetch went back {read[-1]} -> {got}")
                    read.append(got)
                time.sleep(0.02)
            c.close()

        def finish(p: Producer, commit: bool) -> bool:
            """Commit (or abort) the open transaction, retrying what is retriable,
            as librdkafka asks; True if it was committed."""
            while True:
                try:
                    (p.commit_transaction if commit else p.abort_transaction)(60)
                    return commit
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.fatal():
                        raise
                    if commit and err.txn_requires_abort():
                        commit = False
                    elif not err.retriable():
                        raise

        def transactions() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                          "transaction.timeout.ms": 60000, "log_level": 0})
            p.init_transactions(60)
            n = 0
            try:
                while not stop.is_set():
                    p.begin_transaction()
                    for i in range(5):
                        p.produce("out", f"{n}-{i}".encode())
                    if finish(p, commit=n % 3 != 2):
                        committed_txns.append(n)
                    else:
                        aborted_txns.append(n)
                    n += 1
            except KafkaException as exc:
                failures.append(f"transaction {n}: {exc.args[0]}")

        threads = [threading.Thread(target=f, daemon=True)
                   for f in (committer, reader, transactions)]
        for t in threads:
            t.start()
        wait_for("commits and transactions before the cut",
                 lambda: len(acked) > 10 and len(committed_txns) > 2, 60, 0.2)
        cluster.isolate(target)
        time.sleep(8)  # well past the 3 s broker session: the others take over
        cluster.heal()
        before = len(committed_txns), len(acked)
        wait_for("commits and transactions after the heal",
                 lambda: len(committed_txns) > before[0] + 2 and len(acked) > before[1] + 10,
                 90, 0.2)
        stop.set()
        for t in threads:
            t.join(120)
        assert not failures, failures[:5]
        assert read and max(read) <= max(acked), (max(read), max(acked))
        # Every acknowledged commit is there, and the last one is what is read now.
        final = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        last = final.committed([TopicPartition("src", 0)], timeout=20)[0].offset
        final.close()
        assert last >= acked[-1]
        # read_committed: every committed transaction whole, nothing aborted.
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "check",
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("out", 0, 0)])
        seen: list[str] = []
        deadline = time.monotonic() + 30
        want = 5 * len(committed_txns)
        while time.monotonic() < deadline and len(seen) < want:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value().decode())
        # A little more, to see that nothing aborted follows.
        end = time.monotonic() + 2
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.value().decode())
        c.close()
        by_txn: dict[int, list[str]] = {}
        for v in seen:
            by_txn.setdefault(int(v.split("-")[0]), []).append(v)
        assert set(by_txn) == set(committed_txns), (
            sorted(set(by_txn) ^ set(committed_txns))[:10])
        assert all(len(vs) == 5 for vs in by_txn.values())
        assert not set(by_txn) & set(aborted_txns)
    except BaseException:
        stop.set()
        print(cluster.logs())
        raise
    finally:
        stop.set()
        cluster.stop()


def test_a_commit_that_cannot_commit_is_answered_after_the_commit_timeout(
        tmp_path: Path) -> None:
    """Both followers of the group's ``__consumer_offsets`` partition stopped
    (SIGSTOP): the ISR falls below ``min.insync.replicas`` and the high
    watermark cannot pass the commit. It is answered with a retriable error
    after ``offsets.commit.timeout.ms`` (Kafka's behaviour), not held forever
    (a chaos run had a group's commit unanswered for minutes); once the
    followers are back, the same commit succeeds."""
    from odradek.wire.messages import offset_commit_request as oc

    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        **OVERRIDES, "offsets.topic.num.partitions": "1", "offsets.commit.timeout.ms": "3000"})
    cluster.format()
    cluster.start()
    paused: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("src", 1, 3)])["src"].result(30)
        leader = coordinator_of(cluster, "g", 0)  # creates __consumer_offsets
        request = oc.OffsetCommitRequest(group_id="g", topics=[oc.OffsetCommitRequestTopic(
            "src", [oc.OffsetCommitRequestPartition(0, 42)])])

        def commit() -> tuple[int, float]:
            raw = RawClient(cluster.nodes[leader].address, timeout_s=60)
            try:
                started = time.monotonic()
                resp = raw.request(request, 8)
                return resp.topics[0].partitions[0].error_code, time.monotonic() - started
            finally:
                raw.close()

        wait_for("a first commit", lambda: commit()[0] == 0, 60, 0.5)
        for n in cluster.nodes:
            if n != leader:
                cluster.pause(n)
                paused.append(n)
        code, took = commit()
        assert code == 15, code  # COORDINATOR_NOT_AVAILABLE: retriable
        assert 2.5 < took < 10, took
        for n in paused:
            cluster.resume(n)
        paused.clear()
        wait_for("the commit once the followers are back", lambda: commit()[0] == 0, 60, 0.5)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        for n in paused:
            cluster.resume(n)
        cluster.stop()

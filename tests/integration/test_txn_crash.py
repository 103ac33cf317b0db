"""kill -9 inside each step of a transaction: after a restart every transaction is
wholly committed or wholly aborted — in every partition and in the group's
offsets — and the last stable offset moves again.

The broker kills itself with SIGKILL at an exact step (``ODRADEK_CRASH_AT``,
:mod:`odradek.broker.crashpoints`): after PrepareCommit/PrepareAbort is logged,
after the first of the transaction's markers, and once every marker is
written but CompleteX is not. "Before EndTxn" is a plain ``kill -9`` of a
broker holding an open transaction; the restarted coordinator aborts it
when it times out.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.process import ServerProcess

TOPIC = "txn-crash"
PARTITIONS = 3
RECORDS = 12
SOURCE = TopicPartition("source", 0, 42)  # the offset the transaction commits for GROUP
GROUP = "copier"
FAST_ABORT = "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"


def _open_transaction(bootstrap: str) -> Producer:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1),
                                  NewTopic("source", 1, 1)]).values():
        f.result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "crash-tx",
                         "transaction.timeout.ms": 3000, "message.timeout.ms": 3000,
                         "socket.timeout.ms": 3000})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        producer.send_offsets_to_transaction([SOURCE], group.consumer_group_metadata(), 10)
    finally:
        group.close()
    return producer


def _outcome(bootstrap: str) -> tuple[list[bytes], int]:
    """Records a read_committed consumer reads once the LSO has caught up with the
    HW on every partition, and the group's committed offset."""
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                          "isolation.level": "read_committed", "enable.auto.commit": False})
    raw = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-raw",
                    "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            while True:
                lso = committed.get_watermark_offsets(tp, timeout=10, cached=False)[1]
                hw = raw.get_watermark_offsets(tp, timeout=10, cached=False)[1]
                if lso == hw:
                    break
                assert time.monotonic() < deadline, f"LSO {lso} stuck below HW {hw} on {p}"
                time.sleep(0.1)
        ends = {p: raw.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        committed.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        values: list[bytes] = []
        done: set[int] = set()
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for m in committed.consume(100, 0.3):
                assert m.error() is None, m.error()
                values.append(m.value())
            for p in range(PARTITIONS):
                pos = committed.position([TopicPartition(TOPIC, p)])[0].offset
                if pos >= ends[p] or ends[p] == 0:
                    done.add(p)
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                          "enable.auto.commit": False})
        try:
            offset = group.committed([TopicPartition("source", 0)], timeout=10)[0].offset
        finally:
            group.close()
        return sorted(values), offset
    finally:
        committed.close()
        raw.close()


def _wait_dead(server: ServerProcess) -> None:
    assert server.proc is not None
    server.proc.wait(timeout=20)


ALL = sorted(f"r{i}".encode() for i in range(RECORDS))


@pytest.mark.slow  # long for the fast tier (scripts/test.sh --fast)
@pytest.mark.parametrize(("point", "commit"), [
    ("txn.after_prepare", True),
    ("txn.after_prepare", False),
    ("txn.after_first_marker", True),
    ("txn.after_first_marker", False),
    ("txn.before_complete", True),
])
def test_kill_9_inside_end_txn(tmp_path: Path, point: str, commit: bool) -> None:
    server = ServerProcess(tmp_path, env={"ODRADEK_CRASH_AT": point}).start()
    try:
        producer = _open_transaction(server.bootstrap)
        # EndTxn is answered once PrepareX is logged: after that point the
        # client may hear success, before it an error; either way the broker dies.
        with contextlib.suppress(KafkaException):
            if commit:
                producer.commit_transaction(4)
            else:
                producer.abort_transaction(4)
        _wait_dead(server)  # it killed itself at the point
        assert server.proc is not None and server.proc.returncode == -9
        server.env = {}
        server.start()
        values, offset = _outcome(server.bootstrap)
        if commit:
            assert values == ALL, "a decided commit must complete in every partition"
            assert offset == SOURCE.offset
        else:
            assert values == []
            assert offset < 0
    finally:
        server.kill()


def test_kill_9_before_end_txn_aborts_after_the_timeout(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, FAST_ABORT).start()
    try:
        _open_transaction(server.bootstrap)
        server.kill()
        server.start()
        values, offset = _outcome(server.bootstrap)  # waits for the abort
        assert values == [] and offset < 0
    finally:
        server.kill()

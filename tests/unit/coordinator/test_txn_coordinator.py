"""The transaction coordinator's decisions, one rule at a time (Kafka's answers)."""

from __future__ import annotations

import itertools

from odradek.coordinator.txn.coordinator import (
    Decision,
    TransactionCoordinator,
    TxnConfig,
    TxnState,
)
from odradek.coordinator.txn.records import decode, encode
from odradek.wire.errors import ErrorCode as E

NOW = 1_700_000_000_000


class World:
    def __init__(self) -> None:
        self.c = TransactionCoordinator(TxnConfig())
        self.pids = itertools.count(100)
        self.log: list[tuple[bytes, bytes | None]] = []

    def run(self, d: Decision) -> Decision:
        if d.record is not None:
            self.log.append(encode(d.record))
            self.c.replay(decode(*self.log[-1]))
        return d

    def init(self, tid: str = "t", pid: int = -1, epoch: int = -1, timeout: int = 60_000,
             now: int = NOW) -> Decision:
        return self.run(self.c.init_producer_id(tid, timeout, now, lambda: next(self.pids),
                                                pid, epoch))

    def state(self, tid: str = "t") -> TxnState:
        return self.c.transactions[tid].state

    def finish(self, d: Decision) -> None:
        assert d.markers is not None
        self.run(self.c.complete(d.markers, NOW))


def test_init_gives_a_new_id_then_bumps_the_epoch() -> None:
    w = World()
    first = w.init()
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 100, 0)
    again = w.init()
    assert (again.producer_id, again.producer_epoch) == (100, 1)
    assert w.state() is TxnState.EMPTY


def test_init_validates_the_id_and_the_timeout() -> None:
    w = World()
    assert w.init(tid="").error == E.INVALID_REQUEST
    assert w.init(timeout=900_001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert w.init(timeout=0).error == E.INVALID_TRANSACTION_TIMEOUT


def test_a_new_instance_aborts_the_open_transaction_and_retries() -> None:
    w = World()
    d = w.init()
    w.run(w.c.add_partitions("t", d.producer_id, 0, [("a", 0), ("a", 1)], NOW))
    fenced = w.init()
    assert fenced.error == E.CONCURRENT_TRANSACTIONS
    assert fenced.markers is not None and not fenced.markers.commit
    assert fenced.markers.producer_epoch == 1  # the abort is written at the bumped epoch
    assert w.state() is TxnState.PREPARE_ABORT
    assert w.init().error == E.CONCURRENT_TRANSACTIONS  # markers still going
    w.finish(fenced)
    again = w.init()
    assert (again.error, again.producer_epoch) == (E.NONE, 2)
    # the zombie at epoch 0 is fenced everywhere
    assert w.c.end_transaction("t", 100, 0, True, NOW).error == E.PRODUCER_FENCED
    assert w.c.add_partitions("t", 100, 0, [("a", 0)], NOW).error == E.PRODUCER_FENCED


def test_end_txn_answers_retries_and_wrong_decisions_as_kafka_does() -> None:
    w = World()
    d = w.init()
    assert w.c.end_transaction("t", 100, 0, True, NOW).error == E.INVALID_TXN_STATE  # Empty
    w.run(w.c.add_partitions("t", 100, 0, [("a", 0)], NOW))
    commit = w.run(w.c.end_transaction("t", 100, 0, True, NOW))
    assert commit.error == E.NONE and w.state() is TxnState.PREPARE_COMMIT
    assert w.c.end_transaction("t", 100, 0, True, NOW).error == E.CONCURRENT_TRANSACTIONS
    # Markers in flight (Kafka's pending transition): the opposite end waits too.
    assert w.c.end_transaction("t", 100, 0, False, NOW).error == E.CONCURRENT_TRANSACTIONS
    w.finish(commit)
    assert w.state() is TxnState.COMPLETE_COMMIT
    assert w.c.end_transaction("t", 100, 0, True, NOW).error == E.NONE  # a retry
    assert w.c.end_transaction("t", 100, 0, False, NOW).error == E.INVALID_TXN_STATE
    assert w.c.end_transaction("nope", 100, 0, True, NOW).error == E.INVALID_PRODUCER_ID_MAPPING
    assert w.c.end_transaction("t", 101, 0, True, NOW).error == E.INVALID_PRODUCER_ID_MAPPING
    assert d.producer_id == 100


def test_kip360_bump_with_the_current_or_a_retried_epoch() -> None:
    w = World()
    w.init()
    bumped = w.init(pid=100, epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    retried = w.init(pid=100, epoch=0)  # the answer to the bump was lost
    assert (retried.error, retried.producer_epoch) == (E.NONE, 1)
    assert w.init(pid=100, epoch=7).error == E.PRODUCER_FENCED
    assert w.init(pid=999, epoch=1).error == E.PRODUCER_FENCED


def test_timeouts_fence_and_abort_and_idle_ids_expire() -> None:
    w = World()
    w.init(timeout=1000)
    w.run(w.c.add_partitions("t", 100, 0, [("a", 0)], NOW))
    assert w.c.next_deadline_ms() == NOW + 1000
    assert w.c.abort_expired(NOW + 999) == []
    (d,) = w.c.abort_expired(NOW + 1000)
    w.run(d)
    assert w.state() is TxnState.PREPARE_ABORT and w.c.transactions["t"].producer_epoch == 1
    w.finish(d)
    assert w.c.verify(100, 0, ("a", 0)) == E.INVALID_PRODUCER_EPOCH
    day = 7 * 24 * 3600 * 1000
    assert w.c.expire_ids(NOW + day - 1) == []
    (gone,) = w.c.expire_ids(NOW + day)
    w.run(gone)
    assert "t" not in w.c.transactions and 100 not in w.c.by_producer


def test_a_restart_replays_to_the_same_state_and_resumes_markers() -> None:
    w = World()
    w.init()
    w.run(w.c.add_partitions("t", 100, 0, [("a", 0), ("b", 2)], NOW))
    w.run(w.c.end_transaction("t", 100, 0, False, NOW))
    fresh = TransactionCoordinator(TxnConfig())
    for key, value in w.log:
        fresh.replay(decode(key, value))
    assert fresh.transactions == w.c.transactions
    (job,) = fresh.pending_markers()
    assert (job.commit, job.partitions) == (False, frozenset({("a", 0), ("b", 2)}))


def test_records_are_in_kafkas_transaction_log_format() -> None:
    import struct

    from odradek.coordinator.txn.coordinator import TxnMetadata

    meta = TxnMetadata("tx", 7, 3, 60_000, TxnState.ONGOING, {("a", 1), ("a", 0)},
                       start_ms=5, last_update_ms=9)
    key, value = encode(meta.record())
    assert key == struct.pack(">hh", 0, 2) + b"tx"
    assert value == (
        struct.pack(">hqhib", 0, 7, 3, 60_000, 1)
        + struct.pack(">ih", 1, 1) + b"a" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 9, 5)
    )
    empty = TxnMetadata("tx", 7, 4, 60_000, TxnState.EMPTY, start_ms=-1, last_update_ms=9)
    assert encode(empty.record())[1] == (
        struct.pack(">hqhib", 0, 7, 4, 60_000, 0) + struct.pack(">i", -1)
        + struct.pack(">qq", 9, -1))
    assert decode(key, None).value is None


def test_verify_partitions_answers_as_kafkas_coordinator_and_changes_nothing() -> None:
    # AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1)
    w = World()
    d = w.init()
    pid = d.producer_id
    parts = [("a", 0), ("a", 1)]
    assert w.c.verify_partitions("nobody", pid, 0, parts) == dict.fromkeys(
        parts, E.INVALID_PRODUCER_ID_MAPPING)
    assert w.c.verify_partitions("t", pid + 1, 0, parts) == dict.fromkeys(
        parts, E.INVALID_PRODUCER_ID_MAPPING)
    assert w.c.verify_partitions("t", pid, 1, parts) == dict.fromkeys(parts, E.PRODUCER_FENCED)
    # Empty: nothing is in a transaction
    assert w.c.verify_partitions("t", pid, 0, parts) == dict.fromkeys(
        parts, E.TRANSACTION_ABORTABLE)
    w.run(w.c.add_partitions("t", pid, 0, [("a", 0)], NOW))
    assert w.c.verify_partitions("t", pid, 0, parts) == {
        ("a", 0): E.NONE, ("a", 1): E.TRANSACTION_ABORTABLE}
    assert w.c.transactions["t"].partitions == {("a", 0)}  # verification added nothing
    ended = w.run(w.c.end_transaction("t", pid, 0, True, NOW))
    assert w.state() is TxnState.PREPARE_COMMIT
    assert w.c.verify_partitions("t", pid, 0, parts) == dict.fromkeys(
        parts, E.CONCURRENT_TRANSACTIONS)
    w.finish(ended)
    assert w.c.verify_partitions("t", pid, 0, [("a", 0)]) == {("a", 0): E.TRANSACTION_ABORTABLE}

"""Transactions v2 (KIP-890 part 2) in the pure coordinator: every EndTxn of a
v2 client bumps the epoch, with Kafka 4.0's retry rules and producer id
rollover."""

from __future__ import annotations

import dataclasses

from odradek.coordinator.txn.coordinator import (
    MAX_EPOCH,
    Decision,
    TransactionCoordinator,
    TxnConfig,
)
from odradek.coordinator.txn.records import decode, encode
from odradek.coordinator.txn.state import TxnState
from odradek.wire.errors import ErrorCode as E
from tests.unit.coordinator.test_txn_coordinator import NOW, World

V2 = 2


def end(w: World, pid: int, epoch: int, commit: bool, tid: str = "t") -> Decision:
    return w.run(w.c.end_transaction(tid, pid, epoch, commit, NOW, V2, lambda: next(w.pids)))


def open_txn(w: World, pid: int, epoch: int) -> None:
    d = w.run(w.c.add_partitions("t", pid, epoch, [("a", 0)], NOW, client_version=V2))
    assert d.error == E.NONE


def test_every_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    w = World()
    w.c.transaction_version = 2
    d = w.init()
    pid, epoch = d.producer_id, d.producer_epoch
    for commit in (True, False, True):
        open_txn(w, pid, epoch)
        ended = end(w, pid, epoch, commit)
        assert ended.error == E.NONE
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
        assert ended.markers is not None and ended.markers.producer_epoch == epoch + 1
        assert ended.markers.commit is commit
        meta = w.c.transactions["t"]
        assert (meta.producer_epoch, meta.client_version) == (epoch + 1, V2)
        w.finish(ended)
        epoch += 1
    # the old epoch can no longer add to the (next) transaction
    assert w.c.add_partitions("t", pid, epoch - 1, [("a", 0)], NOW).error == E.PRODUCER_FENCED
    assert w.c.verify(pid, epoch - 1, ("a", 0)) == E.INVALID_PRODUCER_EPOCH


def test_retries_of_an_ended_transaction_answer_as_kafka_does() -> None:
    w = World()
    d = w.init()
    pid = d.producer_id
    open_txn(w, pid, 0)
    ended = end(w, pid, 0, True)
    # markers in flight: the same end waits, the other one is invalid
    assert end(w, pid, 0, True).error == E.CONCURRENT_TRANSACTIONS
    assert end(w, pid, 0, False).error == E.INVALID_TXN_STATE
    assert end(w, pid, 1, True).error == E.PRODUCER_FENCED  # the new epoch is not a retry
    w.finish(ended)
    retried = end(w, pid, 0, True)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, pid, 1)
    assert retried.record is None  # nothing bumped again
    assert end(w, pid, 0, False).error == E.INVALID_TXN_STATE
    assert end(w, pid, 5, True).error == E.PRODUCER_FENCED
    assert end(w, pid + 1, 1, True).error == E.INVALID_PRODUCER_ID_MAPPING
    # at the new epoch with nothing added: commit is invalid, abort bumps again
    assert end(w, pid, 1, True).error == E.INVALID_TXN_STATE
    aborted = end(w, pid, 1, False)
    assert (aborted.error, aborted.producer_epoch) == (E.NONE, 2)
    assert aborted.markers is not None and aborted.markers.partitions == frozenset()


def test_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    w = World()
    d = w.init()
    pid = d.producer_id
    meta = w.c.transactions["t"]
    last = MAX_EPOCH - 1
    w.c.transactions["t"] = dataclasses.replace(meta, producer_epoch=last)
    open_txn(w, pid, last)
    ended = end(w, pid, last, True)
    new_pid = ended.producer_id
    assert (ended.error, ended.producer_epoch) == (E.NONE, 0) and new_pid != pid
    assert ended.markers is not None and ended.markers.producer_epoch == MAX_EPOCH
    assert ended.markers.producer_id == pid
    prepared = w.c.transactions["t"]
    assert (prepared.producer_id, prepared.next_producer_id) == (pid, new_pid)
    w.finish(ended)
    done = w.c.transactions["t"]
    assert (done.state, done.producer_id, done.producer_epoch, done.prev_producer_id) == (
        TxnState.COMPLETE_COMMIT, new_pid, 0, pid)
    # the retry with the old id at the last epoch succeeds with the new id
    retried = end(w, pid, last, True)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, new_pid, 0)
    assert end(w, pid, last, False).error == E.INVALID_TXN_STATE
    open_txn(w, new_pid, 0)
    assert end(w, new_pid, 0, False).producer_epoch == 1


def test_v2_records_are_flexible_and_replay_to_the_same_state() -> None:
    w = World()
    w.c.transaction_version = 2
    d = w.init()
    open_txn(w, d.producer_id, 0)
    end(w, d.producer_id, 0, True)
    key, value = w.log[-1]
    assert value is not None and value[:2] == b"\x00\x01"  # value version 1
    record = decode(key, value)
    assert record.value is not None and record.value.client_transaction_version == V2
    assert encode(record) == (key, value)
    fresh = TransactionCoordinator(TxnConfig())
    for k, v in w.log:
        fresh.replay(decode(k, v))
    assert fresh.transactions == w.c.transactions
    (job,) = fresh.pending_markers()
    assert job.producer_epoch == 1


def test_v1_clients_keep_their_epoch_on_a_v2_cluster() -> None:
    w = World()
    w.c.transaction_version = 2
    d = w.init()
    w.run(w.c.add_partitions("t", d.producer_id, 0, [("a", 0)], NOW))
    ended = w.run(w.c.end_transaction("t", d.producer_id, 0, True, NOW))
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.NONE, -1, -1)
    assert ended.markers is not None and ended.markers.producer_epoch == 0
    w.finish(ended)
    assert w.c.transactions["t"].producer_epoch == 0

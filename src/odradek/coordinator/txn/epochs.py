"""Transactions v2's EndTxn (KIP-890 part 2, Kafka 4.0): every end bumps the epoch.

A producer that ends its transaction with EndTxn v5 while ``transaction.version``
>= 2 is finalized runs transactions v2 (``ClientTransactionVersion`` 2 in the
record). Its commit or abort is prepared at epoch + 1: the PrepareCommit or
PrepareAbort record carries the new epoch, the markers are written with it, and
the answer returns the new producer id and epoch, which the producer's next
transaction uses. A batch of the ended transaction that arrives late carries
the old epoch and is refused (by the coordinator when the partition would be
added, by the partition once its marker is written), so it can never become
part of the next transaction.

An exhausted epoch (>= ``MAX_EPOCH - 1``) is bumped to ``MAX_EPOCH`` for the
markers, and a new producer id is taken at the prepare step, kept in
``NextProducerId``; the Complete record switches to it at epoch 0, with the
old one in ``PreviousProducerId``; the answer already carries the new id and
epoch 0.

Kafka's retry rules (``TransactionCoordinator.handleEndTransaction``):
a request is a retry when its epoch is the current one - 1 (the bump it caused)
or, after an exhausted epoch, the previous producer id at ``MAX_EPOCH - 1``.
By state: Ongoing and Empty take only the current epoch; PrepareX only a retry
(same result: CONCURRENT_TRANSACTIONS, the other: INVALID_TXN_STATE);
CompleteX a retry (same result: NONE with the current id and epoch, the other:
INVALID_TXN_STATE) or the current epoch (an abort with nothing added: a bumped
PrepareAbort with no partitions; a commit: INVALID_TXN_STATE). Any other epoch
is PRODUCER_FENCED, another producer id INVALID_PRODUCER_ID_MAPPING.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.txn.state import MAX_EPOCH, Decision, MarkerJob, TxnMetadata, TxnState
from odradek.wire.errors import ErrorCode

E = ErrorCode
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
TV2 = 2
"""The ``ClientTransactionVersion`` of a transactions v2 client."""


def job(meta: TxnMetadata) -> MarkerJob:
    """The markers a PrepareX transaction is owed (at its current epoch)."""
    return MarkerJob(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                     meta.state is TxnState.PREPARE_COMMIT, frozenset(meta.partitions))


def completed(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """CompleteCommit/CompleteAbort after PrepareX's markers; a prepared switch
    to a new producer id (exhausted epoch) takes effect here, at epoch 0."""
    done = (TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT)
    nxt = meta.moved(state=done, partitions=set(), last_update_ms=now_ms, next_producer_id=-1)
    if meta.next_producer_id >= 0:
        nxt.prev_producer_id, nxt.producer_id = meta.producer_id, meta.next_producer_id
        nxt.producer_epoch, nxt.last_producer_epoch = 0, -1
    return nxt


def end_v2(
    meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
    new_producer_id: Callable[[], int], flexible: bool,
) -> Decision:
    """EndTxn of a transactions v2 client (the module's rules)."""
    state = meta.state
    retry_overflow = (meta.prev_producer_id == producer_id and producer_id != meta.producer_id
                      and producer_epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)
    retry_bump = meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1
    current = producer_epoch == meta.producer_epoch
    if meta.producer_id != producer_id and not retry_overflow:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    if state in PREPARED:
        valid = retry_bump
    elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        valid = retry_bump or retry_overflow or current
    else:
        valid = current
    if not valid:
        return Decision(E.PRODUCER_FENCED)
    retry = retry_bump or retry_overflow
    same = (state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)) == commit
    if state is TxnState.ONGOING:
        return _prepare(meta, commit, now_ms, new_producer_id, flexible, nothing_added=False)
    if state in PREPARED:
        return Decision(E.CONCURRENT_TRANSACTIONS if same else E.INVALID_TXN_STATE)
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and retry:
        if same:
            return Decision(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
        return Decision(E.INVALID_TXN_STATE)
    if not commit and state is not TxnState.DEAD:
        # an abort with nothing added: still a bumped epoch, with no markers due
        return _prepare(meta, False, now_ms, new_producer_id, flexible, nothing_added=True)
    return Decision(E.INVALID_TXN_STATE)


def _prepare(meta: TxnMetadata, commit: bool, now_ms: int, new_producer_id: Callable[[], int],
             flexible: bool, nothing_added: bool) -> Decision:
    next_pid = new_producer_id() if meta.producer_epoch >= MAX_EPOCH - 1 else -1
    nxt = meta.moved(
        producer_epoch=meta.producer_epoch + 1,
        state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
        partitions=set() if nothing_added else set(meta.partitions),
        start_ms=now_ms if nothing_added else meta.start_ms, last_update_ms=now_ms,
        last_producer_epoch=meta.producer_epoch, client_version=TV2,
        next_producer_id=next_pid)
    if next_pid >= 0:
        return Decision(record=nxt.record(flexible), markers=job(nxt), producer_id=next_pid,
                        producer_epoch=0)
    return Decision(record=nxt.record(flexible), markers=job(nxt),
                    producer_id=nxt.producer_id, producer_epoch=nxt.producer_epoch)

"""Transactions v2's implicit adds (KIP-890 part 2), as Kafka's
``AddPartitionsToTxnManager`` makes them: a Produce v12 transactional batch, or
a TxnOffsetCommit v5, adds its partition to the producer's transaction itself.

The partition leader asks the transaction's coordinator to add the partitions
(here, when this broker coordinates the transactional id; else with
AddPartitionsToTxn v5, ``verify_only`` false, to the leader of the id's
``__transaction_state`` partition). CONCURRENT_TRANSACTIONS (the previous
transaction's markers are still being written) is retried here, every
``RETRY_S``, until ``timeout_s`` has passed, so the client does not see it
(Kafka's server-side retry). The answer, per partition: NONE, or the
coordinator's error (PRODUCER_FENCED for an old epoch: a zombie of an ended
transaction; INVALID_PRODUCER_ID_MAPPING; INVALID_TXN_STATE), or
COORDINATOR_NOT_AVAILABLE when the coordinator could not be asked or stayed
busy (the caller turns it into its own retriable error).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from odradek.broker.peers import BrokerUnavailable
from odradek.coordinator.txn.records import TXN_TOPIC
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.coordinators.txn_runtime import TxnRuntime

log = logging.getLogger("odradek.transactions")
RETRY_S = 0.02
TV2 = 2

Partition = tuple[str, int]


async def add_implicitly(
    runtime: TxnRuntime, transactional_id: str, producer_id: int, producer_epoch: int,
    partitions: Sequence[Partition], timeout_s: float,
) -> dict[Partition, ErrorCode]:
    """Add ``partitions`` to the producer's transaction (the module's rules)."""
    deadline = time.monotonic() + max(timeout_s, RETRY_S)
    while True:
        if runtime.coordinator_error(transactional_id):
            codes = await _remote(runtime, transactional_id, producer_id, producer_epoch,
                                  partitions)
        else:
            decision = runtime.coordinator.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions,
                runtime.clock.now_ms(), client_version=TV2)
            code = await runtime.run(transactional_id, decision)
            codes = dict.fromkeys(partitions, ErrorCode(code))
        busy = any(c == ErrorCode.CONCURRENT_TRANSACTIONS for c in codes.values())
        if not busy or time.monotonic() >= deadline:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE
                    if c == ErrorCode.CONCURRENT_TRANSACTIONS else c for tp, c in codes.items()}
        await asyncio.sleep(RETRY_S)


async def _remote(
    runtime: TxnRuntime, transactional_id: str, producer_id: int, producer_epoch: int,
    partitions: Sequence[Partition],
) -> dict[Partition, ErrorCode]:
    """AddPartitionsToTxn v5 (``verify_only`` false) to the id's coordinator."""
    from odradek.wire.messages import add_partitions_to_txn_request as ap

    image = runtime.metadata.image
    topic = image.topics.get(TXN_TOPIC)
    p = topic.partitions.get(runtime.partition_of(transactional_id)) if topic else None
    leader = p.leader if p is not None else -1
    unavailable = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if leader < 0 or leader == runtime.metadata.node_id:
        return unavailable
    by_topic: dict[str, list[int]] = {}
    for name, index in partitions:
        by_topic.setdefault(name, []).append(index)
    request = ap.AddPartitionsToTxnRequest(transactions=[ap.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id,
        producer_epoch=producer_epoch, verify_only=False,
        topics=[ap.AddPartitionsToTxnTopic(t, ids) for t, ids in by_topic.items()])])
    try:
        response = await runtime.channel.request(leader, request, 5)
    except BrokerUnavailable as exc:
        log.info("adding to %r at its coordinator %d failed: %s", transactional_id, leader, exc)
        return unavailable
    if response.error_code:
        return dict.fromkeys(partitions, ErrorCode(response.error_code))
    codes = dict(unavailable)
    for result in response.results_by_transaction:
        for t in result.topic_results:
            for r in t.results_by_partition:
                codes[(t.name, r.partition_index)] = ErrorCode(r.partition_error_code)
    return codes

"""TxnOffsetCommit (key 28), versions 0–5: offsets committed inside a transaction.

Behaviour: the producer must have added the group (AddOffsetsToTxn) to its
ongoing transaction at its current epoch, else every partition gets
INVALID_TXN_STATE (or INVALID_PRODUCER_EPOCH for an old epoch). That is asked
of the transaction's own coordinator: here if this broker coordinates the
transactional id, else (a cluster where the group's and the transaction's
coordinators are different brokers) with AddPartitionsToTxn v4
``verify_only`` sent to it (KIP-890); if it cannot be asked now, every
partition gets COORDINATOR_NOT_AVAILABLE and the client retries. The group
coordinator validates the commit as an OffsetCommit (v3: generation, member
and instance id, KIP-447) and appends the offsets as the producer's
transactional batch; they become visible when the COMMIT marker reaches the
offsets partition, and vanish on ABORT. Until then OffsetFetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them.

Version notes: v2 leader epochs; v3 flexible, with generation, member and
instance ids; v4 (KIP-890) TRANSACTION_ABORTABLE: a group not added to the
producer's ongoing transaction is answered TRANSACTION_ABORTABLE instead of
INVALID_TXN_STATE, as Kafka's verification answers v4 clients; v5 has v4's
fields and, with ``transaction.version`` >= 2 finalized, is transactions v2's
form: the group's offsets partition is added to the producer's transaction
by the broker itself (the implicit AddOffsetsToTxn,
:mod:`odradek.broker.coordinators.txn_implicit`) before the commit is
verified; a refused add answers every partition with the coordinator's error
(PRODUCER_FENCED for an ended transaction's epoch; COORDINATOR_NOT_AVAILABLE
when it cannot be asked now).
"""

from __future__ import annotations

import logging

from odradek.broker.handlers.acl_checks import (
    BY_NAME,
    READ,
    WRITE,
    denied_topics,
    group_allowed,
    txn_allowed,
)
from odradek.broker.handlers.group_common import group_runtime
from odradek.broker.handlers.txn_common import client_version, txn_runtime
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import CoordinatorWriteError
from odradek.coordinator.offsets import Commit, CommitRequest
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from odradek.wire.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

log = logging.getLogger("odradek.transactions")
IMPLICIT_S = 5.0
"""How long an implicit add retries CONCURRENT_TRANSACTIONS (v5, transactions v2)."""


def _answer(errors: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitResponsePartition(partition_index=index, error_code=code))
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponseTopic(name=t, partitions=p) for t, p in by_topic.items()])


def _codes(answer: TxnOffsetCommitResponse) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in answer.topics for p in t.partitions}


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("WRITE", "TRANSACTIONAL_ID"), Access("READ", "GROUP"), Access("READ", "TOPIC"))


@handler(28, (0, 5), access=ACCESS)
async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not txn_allowed(ctx, WRITE, request.transactional_id):
        return _answer(dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not group_allowed(ctx, READ, request.group_id):
        return _answer(dict.fromkeys(wanted, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    denied = denied_topics(ctx, READ, request.topics, BY_NAME)
    if not denied:
        return await _commit(ctx, request, wanted)
    # the topics it may not read are refused, the others committed
    refused: dict[tuple[str, int], int] = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp[0] in denied}
    request.topics = [t for t in request.topics if t.name not in denied]
    if not request.topics:
        return _answer(refused)
    answer = await _commit(ctx, request, [tp for tp in wanted if tp[0] not in denied])
    return _answer({**_codes(answer), **refused})


async def _commit(ctx: RequestContext, request: TxnOffsetCommitRequest,
                  wanted: list[tuple[str, int]]) -> TxnOffsetCommitResponse:
    txns = await txn_runtime(ctx)
    groups = await group_runtime(ctx)
    if txns is None or groups is None:
        return _answer(dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    if not request.group_id:
        return _answer(dict.fromkeys(wanted, ErrorCode.INVALID_GROUP_ID))
    partition = (OFFSETS_TOPIC, groups.coordinator.partition_of(request.group_id))
    if client_version(ctx, 5):
        added = await txns.add_implicitly(request.transactional_id, request.producer_id,
                                          request.producer_epoch, [partition], IMPLICIT_S)
        if code := added[partition]:
            log.info("TxnOffsetCommit of group %r for %r: the implicit add was refused: %s",
                     request.group_id, request.transactional_id, ErrorCode(code).name)
            return _answer(dict.fromkeys(wanted, code))
    code = await txns.verify(request.transactional_id, request.producer_id,
                             request.producer_epoch, partition)
    if code == ErrorCode.INVALID_TXN_STATE and ctx.api_version >= 4:
        code = ErrorCode.TRANSACTION_ABORTABLE
    if code:
        log.info("TxnOffsetCommit of group %r for %r refused: %s", request.group_id,
                 request.transactional_id, ErrorCode(code).name)
        return _answer(dict.fromkeys(wanted, code))
    v3 = ctx.api_version >= 3
    req = CommitRequest(
        group_id=request.group_id,
        generation=request.generation_id if v3 else -1,
        member_id=request.member_id if v3 else "",
        group_instance_id=request.group_instance_id if v3 else None,
        retention_ms=-1,
        commits=[Commit(t.name, p.partition_index, p.committed_offset,
                        p.committed_leader_epoch, p.committed_metadata)
                 for t in request.topics for p in t.partitions],
    )
    image = ctx.broker.image

    def exists(topic: str, index: int) -> bool:
        t = image.topics.get(topic)
        return t is not None and index in t.partitions

    try:
        errors = await groups.txn_commit(req, request.producer_id, request.producer_epoch,
                                         exists)
    except CoordinatorWriteError:
        return _answer(dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    return _answer(errors)

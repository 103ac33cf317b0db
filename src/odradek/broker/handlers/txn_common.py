"""What the transaction handlers share: finding the coordinator's shell, and
Kafka's per-version spelling of "fenced"."""

from __future__ import annotations

from typing import Final

from odradek.broker.net.context import RequestContext
from odradek.broker.ports import TxnPort
from odradek.metadata import features
from odradek.wire.errors import ErrorCode

TV2: Final = 2
"""``transaction.version`` (and ``ClientTransactionVersion``) of transactions v2."""


def transaction_version(ctx: RequestContext) -> int:
    """The finalized ``transaction.version`` (the metadata log's level)."""
    return features.level(ctx.broker.image, features.TRANSACTION_VERSION)


def client_version(ctx: RequestContext, first_v2_version: int) -> int:
    """The transaction version a request's client runs (Kafka 4.0's rule): 2 when
    ``transaction.version`` >= 2 is finalized and the request is at least
    ``first_v2_version`` (EndTxn v5, Produce v12, TxnOffsetCommit v5), else 0."""
    return TV2 if (ctx.api_version >= first_v2_version
                   and transaction_version(ctx) >= TV2) else 0


async def txn_runtime(ctx: RequestContext) -> TxnPort | None:
    """The transaction coordinator, with ``__transaction_state`` created if
    missing; None when it cannot serve (COORDINATOR_NOT_AVAILABLE)."""
    runtime = ctx.txns
    runtime.coordinator.transaction_version = transaction_version(ctx)
    if not await runtime.ensure_topic():
        return None
    await runtime.loaded.wait()
    return runtime


def fenced_as(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED for request versions from ``first_version`` on; before it
    Kafka answers INVALID_PRODUCER_EPOCH, which older clients know."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code

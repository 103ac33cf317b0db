"""What the transaction handlers share: finding the coordinator's shell, and
Kafka's per-version spelling of "fenced"."""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.ports import TxnPort
from odradek.wire.errors import ErrorCode


async def txn_runtime(ctx: RequestContext) -> TxnPort | None:
    """The transaction coordinator, with ``__transaction_state`` created if
    missing; None when it cannot serve (COORDINATOR_NOT_AVAILABLE)."""
    runtime = ctx.txns
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

"""AlterClientQuotas (key 49), versions 0–1.

Behaviour: each entry (an entity and its ops: set a key to a value, or remove
it) is validated on its own (:func:`odradek.metadata.quotas.alter`) and
answered with its own error: INVALID_REQUEST for an unknown entity type, a
duplicate type, ip combined with user or client-id, an unknown key for the
entity, a duplicate key, or a value that is not positive (or not whole for
byte and connection rates). Valid entries are committed to the metadata
journal as ``ClientQuotaRecord``s (and take effect at once), unless
``validate_only``.

Version notes: v1 is flexible.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import quotas
from odradek.metadata.image import MetadataImage
from odradek.wire.messages.alter_client_quotas_request import AlterClientQuotasRequest
from odradek.wire.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
)


def _alter(image: MetadataImage, pairs: list[tuple[str, str | None]],
           ops: list[tuple[str, float, bool]]) -> quotas.Alteration:
    return quotas.alter(image.client_quotas, pairs, ops)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("ALTER_CONFIGS", "CLUSTER"),)


def error_response(request: AlterClientQuotasRequest, code: int) -> AlterClientQuotasResponse:
    """Every entry refused with ``code``."""
    return AlterClientQuotasResponse(entries=[
        EntryData(code, None, [EntityData(e.entity_type, e.entity_name) for e in entry.entity])
        for entry in request.entries])


@handler(49, (0, 1), error_response=error_response, access=ACCESS)
async def handle(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    state = ctx.broker
    out = []
    for entry in request.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        ops = [(op.key, op.value, op.remove) for op in entry.ops]
        result = await state.write(
            partial(_alter, pairs=pairs, ops=ops),
            apply=not request.validate_only)
        out.append(EntryData(
            error_code=result.error, error_message=result.message,
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in pairs],
        ))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=out)

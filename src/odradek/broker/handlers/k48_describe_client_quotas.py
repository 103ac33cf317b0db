"""DescribeClientQuotas (key 48), versions 0–1.

Behaviour: the quotas of every entity matching the filter, Kafka's rules
(:func:`odradek.metadata.quotas.describe`): per component an exact name (0),
the default (1) or any specified name (2); ``strict`` leaves out entities
with types the filter does not name. A bad filter (duplicate types, an ip
component beside user or client-id, an exact match with no name, an unknown
match type) gets INVALID_REQUEST with a message.

Version notes: v1 is flexible.
"""

from __future__ import annotations

from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata import quotas
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from odradek.wire.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)

# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (Access("DESCRIBE_CONFIGS", "CLUSTER"),)


@handler(48, (0, 1), access=ACCESS)
async def handle(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    found = quotas.describe(ctx.broker.image.client_quotas, components, request.strict)
    if isinstance(found, str):
        return DescribeClientQuotasResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message=found, entries=None)
    return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=[
        EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in found
    ])

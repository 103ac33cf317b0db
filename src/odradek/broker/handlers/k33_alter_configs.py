"""AlterConfigs (key 33), versions 0–2.

Behaviour: replaces a topic's whole set of overrides (configs left out return
to their defaults), after validating every name and value (INVALID_CONFIG).
Dynamic broker configs are not supported yet: INVALID_REQUEST.

Version notes: v1 is the same body; v2 is flexible.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.context import RequestContext
from odradek.broker.handlers.configs import TOPIC_RESOURCE
from odradek.broker.registry import handler
from odradek.metadata import controller
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.alter_configs_request import (
    AlterConfigsRequest,
    AlterConfigsResource,
)
from odradek.wire.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)


def _replace_all(image: MetadataImage, res: AlterConfigsResource) -> controller.Outcome:
    """AlterConfigs replaces a topic's whole set: every override not named goes."""
    topic = image.topics.get(res.resource_name)
    new: dict[str, str | None] = {c.name: c.value for c in res.configs}
    if topic is not None:
        for name in topic.configs:
            new.setdefault(name, None)
    return controller.alter_topic_configs(image, res.resource_name, new)


@handler(33, (0, 2))
async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    state = ctx.broker
    out = []
    for res in request.resources:
        resp = AlterConfigsResourceResponse(
            error_code=0, error_message=None,
            resource_type=res.resource_type, resource_name=res.resource_name,
        )
        if res.resource_type != TOPIC_RESOURCE:
            resp.error_code = ErrorCode.INVALID_REQUEST
            resp.error_message = "Only topic configs can be altered on this broker"
        else:
            outcome = await state.write(partial(_replace_all, res=res),
                                        apply=not request.validate_only)
            resp.error_code, resp.error_message = outcome.error, outcome.message
        out.append(resp)
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)

"""IncrementalAlterConfigs (key 44), versions 0–1.

Behaviour: per config SET (0), DELETE (1, back to the default), APPEND (2) and
SUBTRACT (3) for list configs such as ``cleanup.policy``; every change is
validated first and the whole resource fails with INVALID_CONFIG if one does.
Only topic resources are alterable today (INVALID_REQUEST otherwise).

Version notes: v1 is flexible.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.context import RequestContext
from odradek.broker.handlers.configs import TOPIC_RESOURCE
from odradek.broker.registry import handler
from odradek.metadata import controller
from odradek.metadata.topic_configs import TOPIC_CONFIGS
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.incremental_alter_configs_request import (
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from odradek.wire.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _changes(
    res: AlterConfigsResource, current: dict[str, str]
) -> dict[str, str | None] | str:
    changes: dict[str, str | None] = {}
    for c in res.configs:
        d = TOPIC_CONFIGS.get(c.name)
        if c.config_operation == SET:
            changes[c.name] = c.value
        elif c.config_operation == DELETE:
            changes[c.name] = None
        elif c.config_operation in (APPEND, SUBTRACT):
            if d is None or d.kind != "list":
                return f"Config value append/subtract is not allowed for config {c.name}"
            base = changes.get(c.name) or current.get(c.name) or d.default
            items = [x for x in base.split(",") if x]
            delta = [x for x in (c.value or "").split(",") if x]
            if c.config_operation == APPEND:
                items += [x for x in delta if x not in items]
            else:
                items = [x for x in items if x not in delta]
            changes[c.name] = ",".join(items) if items else None
        else:
            return f"Unknown config operation {c.config_operation}"
    return changes


@handler(44, (0, 1))
async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    state = ctx.broker
    out = []
    for res in request.resources:
        resp = AlterConfigsResourceResponse(
            error_code=0, error_message=None,
            resource_type=res.resource_type, resource_name=res.resource_name,
        )
        topic = state.image.topics.get(res.resource_name)
        if res.resource_type != TOPIC_RESOURCE:
            resp.error_code = ErrorCode.INVALID_REQUEST
            resp.error_message = "Only topic configs can be altered on this broker"
        elif topic is None:
            resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            resp.error_message = f"Topic {res.resource_name} does not exist."
        else:
            changes = _changes(res, topic.configs)
            if isinstance(changes, str):
                resp.error_code, resp.error_message = ErrorCode.INVALID_CONFIG, changes
            else:
                outcome = await state.write(
                    partial(controller.alter_topic_configs, name=res.resource_name,
                            changes=changes), apply=not request.validate_only)
                resp.error_code, resp.error_message = outcome.error, outcome.message
        out.append(resp)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)

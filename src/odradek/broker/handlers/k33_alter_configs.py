"""AlterConfigs (key 33), versions 0–2.

Behaviour: replaces a resource's whole set of configs (configs left out return
to the next source), after validating every name and value. A topic resource:
the topic's overrides (INVALID_CONFIG for a bad one). A broker resource (this
node's id, or ``""`` for the cluster default): its dynamic broker configs,
checked as IncrementalAlterConfigs checks them (k44). Duplicate names and
null values get INVALID_REQUEST, as in Kafka.

Version notes: v1 is the same body; v2 is flexible.
"""

from __future__ import annotations

from functools import partial

from odradek.broker.handlers.acl_checks import ALTER_CONFIGS, config_denied
from odradek.broker.handlers.configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    accepts_broker_resource,
)
from odradek.broker.handlers.topics import protect_internal
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.broker.ports import MetadataPort
from odradek.metadata import controller
from odradek.metadata.broker_configs import alter_broker_configs
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


def _replace_topic(image: MetadataImage, res: AlterConfigsResource,
                   protect: bool = True) -> controller.Outcome:
    """AlterConfigs replaces a topic's whole set: every override not named goes."""
    topic = image.topics.get(res.resource_name)
    new: dict[str, str | None] = {c.name: c.value for c in res.configs}
    if topic is not None:
        for name in topic.configs:
            new.setdefault(name, None)
    return controller.alter_topic_configs(image, res.resource_name, new,
                                          protect_internal=protect)


def _replace_broker(image: MetadataImage, res: AlterConfigsResource) -> controller.Outcome:
    """The same for a broker resource's dynamic configs."""
    new: dict[str, str | None] = {c.name: c.value for c in res.configs}
    for name in image.broker_configs.get(res.resource_name, {}):
        new.setdefault(name, None)
    return alter_broker_configs(image, res.resource_name, new)


async def _alter(
    state: MetadataPort, res: AlterConfigsResource, validate_only: bool
) -> tuple[int, str | None]:
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    if res.resource_type == BROKER_RESOURCE:
        problem = accepts_broker_resource(state, res.resource_name)
        if problem:
            return ErrorCode.INVALID_REQUEST, problem
        decide = partial(_replace_broker, res=res)
    elif res.resource_type == TOPIC_RESOURCE:
        decide = partial(_replace_topic, res=res, protect=protect_internal(state))
    else:
        return ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}"
    outcome = await state.write(decide, apply=not validate_only)
    return outcome.error, outcome.message


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("ALTER_CONFIGS", "CLUSTER", "broker resources"),
    Access("ALTER_CONFIGS", "TOPIC", "topic resources"),
)


@handler(33, (0, 2), access=ACCESS)
async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    out = []
    for res in request.resources:
        denied = config_denied(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
        error, message = ((denied, None) if denied else
                          await _alter(ctx.broker, res, request.validate_only))
        out.append(AlterConfigsResourceResponse(
            error_code=error, error_message=message,
            resource_type=res.resource_type, resource_name=res.resource_name,
        ))
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)

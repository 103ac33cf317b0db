"""IncrementalAlterConfigs (key 44), versions 0–1.

Behaviour: per config SET (0), DELETE (1, back to the next source), APPEND (2)
and SUBTRACT (3) for list configs such as ``cleanup.policy``; every change is
validated first and the whole resource fails if one does. A topic resource
changes the topic's configs (INVALID_CONFIG for a bad name or value). A broker
resource — this node's id, or ``""`` for the cluster default — changes dynamic
broker configs (KIP-226), stored as ConfigRecords in the metadata log and in
effect at once on every broker they apply to: a read-only config or a value
that does not parse gets INVALID_REQUEST with Kafka's message ("Cannot update
these configs dynamically: Set(...)"), a name Odradek does not know
INVALID_CONFIG. Duplicate names and null values for SET get INVALID_REQUEST,
as in Kafka. ``validate_only`` checks and writes nothing.

Version notes: v1 is flexible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from odradek.broker.config import DEFAULTS
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
from odradek.metadata.broker_configs import alter_broker_configs, config_def
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
    res: AlterConfigsResource, current: Mapping[str, str],
    list_default: Callable[[str], str | None],
) -> dict[str, str | None] | str:
    """The changes as name → new value (None: delete), or why they are refused.
    ``list_default`` gives a list config's default (None: not a list config)."""
    changes: dict[str, str | None] = {}
    for c in res.configs:
        if c.config_operation == SET:
            changes[c.name] = c.value
        elif c.config_operation == DELETE:
            changes[c.name] = None
        elif c.config_operation in (APPEND, SUBTRACT):
            default = list_default(c.name)
            if default is None:
                return f"Config value append/subtract is not allowed for config {c.name}"
            base = changes.get(c.name) or current.get(c.name) or default
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


def _request_error(res: AlterConfigsResource) -> str | None:
    """Kafka's checks before any other: no name twice, no null value but to delete."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        return "Error due to duplicate config keys"
    nulls = [c.name for c in res.configs if c.config_operation != DELETE and c.value is None]
    return f"Null value not supported for : {', '.join(nulls)}" if nulls else None


def _topic_list_default(name: str) -> str | None:
    d = TOPIC_CONFIGS.get(name)
    return d.default if d is not None and d.kind in ("list", "replicas") else None


def _broker_list_default(name: str) -> str | None:
    d = config_def(name)
    return DEFAULTS.get(name, "") if d is not None and d.kind == "list" else None


async def _alter(
    state: MetadataPort, res: AlterConfigsResource, validate_only: bool
) -> tuple[int, str | None]:
    problem = _request_error(res)
    if problem:
        return ErrorCode.INVALID_REQUEST, problem
    if res.resource_type == BROKER_RESOURCE:
        problem = accepts_broker_resource(state, res.resource_name)
        if problem:
            return ErrorCode.INVALID_REQUEST, problem
        current = state.image.broker_configs.get(res.resource_name, {})
        changes = _changes(res, current, _broker_list_default)
        if isinstance(changes, str):
            return ErrorCode.INVALID_REQUEST, changes
        outcome = await state.write(partial(alter_broker_configs, resource_name=res.resource_name,
                                            changes=changes), apply=not validate_only)
        return outcome.error, outcome.message
    if res.resource_type != TOPIC_RESOURCE:
        return ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}"
    topic = state.image.topics.get(res.resource_name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist."
    changes = _changes(res, topic.configs, _topic_list_default)
    if isinstance(changes, str):
        return ErrorCode.INVALID_CONFIG, changes
    outcome = await state.write(
        partial(controller.alter_topic_configs, name=res.resource_name, changes=changes,
                protect_internal=protect_internal(state)),
        apply=not validate_only)
    return outcome.error, outcome.message


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("ALTER_CONFIGS", "CLUSTER", "broker resources"),
    Access("ALTER_CONFIGS", "TOPIC", "topic resources"),
    Access("ALTER_CONFIGS", "GROUP", "group resources"),
)


@handler(44, (0, 1), access=ACCESS)
async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    out = []
    for res in request.resources:
        denied = config_denied(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
        error, message = ((denied, None) if denied else
                          await _alter(ctx.broker, res, request.validate_only))
        out.append(AlterConfigsResourceResponse(
            error_code=error, error_message=message,
            resource_type=res.resource_type, resource_name=res.resource_name,
        ))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)

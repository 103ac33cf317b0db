"""DescribeConfigs (key 32), versions 0–4.

Behaviour: a topic resource lists every topic config with its effective value
and source (topic override, static broker config, default) — never an empty
list (a trap other Kafka-compatible brokers fell into); ``configuration_keys``
narrows the list. A broker resource (this node's id, or "" for the default)
lists the broker configs Odradek reads. Other resource types get
INVALID_REQUEST.

Version notes: v0 has ``is_default`` instead of sources; v1 sources and
synonyms; v3 config types and documentation (empty); v4 is flexible.
"""

from __future__ import annotations

from odradek.broker.context import RequestContext
from odradek.broker.handlers.configs import (
    BROKER_RESOURCE,
    SOURCE_DEFAULT,
    TOPIC_RESOURCE,
    broker_config_entries,
    topic_config_entries,
)
from odradek.broker.registry import handler
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)


def _entry(
    version: int, name: str, value: str, source: int, ctype: int,
    synonyms: list[tuple[str, str, int]], include_synonyms: bool,
) -> DescribeConfigsResourceResult:
    entry = DescribeConfigsResourceResult(
        name=name, value=value, read_only=False, config_source=source,
        is_sensitive=False, config_type=ctype, documentation=None,
    )
    if version == 0:
        entry.is_default = source == SOURCE_DEFAULT
    if include_synonyms and version >= 1:
        entry.synonyms = [DescribeConfigsSynonym(n, v, s) for n, v, s in synonyms]
    return entry


def _describe(
    ctx: RequestContext, res: DescribeConfigsResource, include_synonyms: bool
) -> DescribeConfigsResult:
    state = ctx.broker
    v = ctx.api_version
    result = DescribeConfigsResult(
        error_code=0, error_message=None,
        resource_type=res.resource_type, resource_name=res.resource_name,
    )
    keys = None if res.configuration_keys is None else set(res.configuration_keys)
    if res.resource_type == TOPIC_RESOURCE:
        topic = state.image.topics.get(res.resource_name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"Topic {res.resource_name} does not exist."
            return result
        entries = topic_config_entries(topic.configs, state.config)
        result.configs = [
            _entry(v, n, val, src, t, syn, include_synonyms)
            for n, val, src, t, syn in entries
            if keys is None or n in keys
        ]
    elif res.resource_type == BROKER_RESOURCE:
        if res.resource_name not in ("", str(state.node_id)):
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Unexpected broker id, expected {state.node_id}"
            return result
        result.configs = [
            _entry(v, n, val, src, t, [(n, val, src)], include_synonyms)
            for n, val, src, t in broker_config_entries(state.config)
            if keys is None or n in keys
        ]
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type {res.resource_type}"
    return result


@handler(32, (0, 4))
async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[_describe(ctx, r, request.include_synonyms) for r in request.resources],
    )

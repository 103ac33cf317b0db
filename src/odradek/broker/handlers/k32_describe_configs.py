"""DescribeConfigs (key 32), versions 0–4.

Behaviour: a topic resource lists every topic config with its effective value
and source (topic config, dynamic or static broker config, default) — never an
empty list (a trap other Kafka-compatible brokers fell into). A broker
resource named by this node's id lists every broker config Odradek honours,
with its value, source, synonyms and whether it is read-only (Kafka's dynamic
update mode); the resource ``""`` lists the dynamic cluster defaults that are
set. ``configuration_keys`` narrows the list (null or empty: all). Other
resource types get INVALID_REQUEST. See handlers/configs.py for sources and
synonyms.

Version notes: v0 has ``is_default`` instead of sources; v1 sources and
synonyms; v3 config types and documentation (empty); v4 is flexible.
"""

from __future__ import annotations

from odradek.broker.handlers.acl_checks import DESCRIBE_CONFIGS, config_denied
from odradek.broker.handlers.configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    Entry,
    broker_config_entries,
    broker_resource_error,
    default_config_entries,
    topic_config_entries,
)
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata.broker_configs import SOURCE_DEFAULT
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

SENSITIVE_SUFFIXES = ("sasl.jaas.config", "password", "ssl.keystore.key")
"""Kafka's PASSWORD-type configs (also under ``listener.name.<l>.[<mech>.]``):
answered with a null value and ``IsSensitive``, never their text."""


def is_sensitive(name: str) -> bool:
    return name.endswith(SENSITIVE_SUFFIXES)


def _entry(version: int, e: Entry, include_synonyms: bool) -> DescribeConfigsResourceResult:
    sensitive = e.sensitive or is_sensitive(e.name)
    entry = DescribeConfigsResourceResult(
        name=e.name, value=None if sensitive else e.value, read_only=e.read_only,
        config_source=e.source, is_sensitive=sensitive, config_type=e.config_type,
        documentation=None,
    )
    if version == 0:
        entry.is_default = e.source == SOURCE_DEFAULT
    if include_synonyms and version >= 1:
        entry.synonyms = [DescribeConfigsSynonym(n, None if is_sensitive(n) else v, s)
                          for n, v, s in e.synonyms]
    return entry


def _describe(
    ctx: RequestContext, res: DescribeConfigsResource, include_synonyms: bool
) -> DescribeConfigsResult:
    state = ctx.broker
    result = DescribeConfigsResult(
        error_code=0, error_message=None,
        resource_type=res.resource_type, resource_name=res.resource_name,
    )
    if res.resource_type == TOPIC_RESOURCE:
        topic = state.image.topics.get(res.resource_name)
        if topic is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"Topic {res.resource_name} does not exist."
            return result
        entries = topic_config_entries(topic.configs, state.config)
    elif res.resource_type == BROKER_RESOURCE:
        problem = broker_resource_error(res.resource_name, state.node_id)
        if problem:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, problem
            return result
        entries = (default_config_entries(state.config) if res.resource_name == ""
                   else broker_config_entries(state.config))
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type: {res.resource_type}"
        return result
    keys = set(res.configuration_keys or ())  # null or empty: every config, as Kafka
    result.configs = [_entry(ctx.api_version, e, include_synonyms) for e in entries
                      if not keys or e.name in keys]
    return result


def _refused(r: DescribeConfigsResource, code: int) -> DescribeConfigsResult:
    return DescribeConfigsResult(error_code=code, error_message=None,
                                 resource_type=r.resource_type, resource_name=r.resource_name)


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("DESCRIBE_CONFIGS", "CLUSTER", "broker resources"),
    Access("DESCRIBE_CONFIGS", "TOPIC", "topic resources"),
    Access("DESCRIBE_CONFIGS", "GROUP", "group resources"),
)


@handler(32, (0, 4), access=ACCESS)
async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[_refused(r, code) if (code := config_denied(
                     ctx, DESCRIBE_CONFIGS, r.resource_type, r.resource_name))
                 else _describe(ctx, r, request.include_synonyms) for r in request.resources],
    )

"""Metadata (key 3), versions 0–13.

Behaviour: each partition with its leader, leader epoch, replicas, ISR and
offline replicas (on brokers fenced or gone), from the metadata image; a
partition without a leader (its ISR all dead) is answered LEADER_NOT_AVAILABLE
with leader -1, never a guessed leader (librdkafka would fetch from it under
a stale epoch). Brokers: the live ones. A null topic list
(or an empty one at v0) means all topics. A requested topic that does not exist
is created when ``auto.create.topics.enable`` is true and the request allows it
(always at v0–3), with ``num.partitions`` partitions; otherwise it gets
UNKNOWN_TOPIC_OR_PARTITION, and an illegal name INVALID_TOPIC_EXCEPTION.

Authorization (with an authorizer): topics the principal may not DESCRIBE are
left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when
named, before their existence is looked at; auto-creation needs CREATE on the
cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.

A cluster node that is still replaying the metadata log after a restart
(Kafka's broker takes no requests until it has caught up) holds the answer up
to :data:`CATCH_UP_WAIT_S` for the replay; if it is still behind, a topic it
does not know yet is answered LEADER_NOT_AVAILABLE (retriable), never
UNKNOWN_TOPIC_OR_PARTITION, and nothing is auto-created: the topic may well
exist.

Version notes: v1 controller id and is_internal; v2 cluster id; v4 the
auto-creation flag; v5 offline replicas; v7 leader epochs; v8–10 authorized
operations of the cluster, v8+ of each topic (bit *n*: operation *n* allowed;
-2^31 when not asked); v10 topic ids; v12 lookup by topic id (an unknown
id is answered UNKNOWN_TOPIC_ID with a null name and the id echoed, as Kafka
does); v13 a top-level error code (KIP-1102), which is always 0: like Kafka
4.0's brokers, Odradek never asks a client to rebootstrap
(REBOOTSTRAP_REQUIRED). v13's classes come from the project's overlay
(``tools/codegen/overlay``) on the pre-4.0 specs.
"""

from __future__ import annotations

import dataclasses
import uuid

from odradek.broker.handlers.acl_checks import (
    CLUSTER,
    CREATE,
    DESCRIBE,
    TOPIC,
    authorized_operations,
    cluster_allowed,
    topic_allowed,
)
from odradek.broker.handlers.topics import INTERNAL_TOPICS, auto_create
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import Access, handler
from odradek.metadata.acls import CLUSTER_NAME
from odradek.metadata.controller import topic_name_error
from odradek.metadata.image import MetadataImage, TopicImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.metadata_request import MetadataRequest
from odradek.wire.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from odradek.wire.primitives import ZERO_UUID

_NONE_OFFLINE: list[int] = []
"""The offline replicas of a partition whose replicas are all live: one list for
every such answer (answers are only read by the encoder)."""


def _offline(replicas: list[int], live: set[int]) -> list[int]:
    offline = [r for r in replicas if r not in live] if live else []
    return offline or _NONE_OFFLINE


def _topic(t: TopicImage, image: MetadataImage) -> MetadataResponseTopic:
    """A partition without a leader is LEADER_NOT_AVAILABLE (clients retry soon);
    offline replicas are those on brokers that are fenced or gone. The replica
    and ISR lists are the image's own (never changed in place: see
    :func:`odradek.metadata.image.shared_list`), not copies: a cached answer
    costs no lists of its own per partition."""
    live = {b.node_id for b in image.brokers.values() if not b.fenced}
    partitions = [
        MetadataResponsePartition(
            error_code=0 if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas,
            isr_nodes=p.isr,
            offline_replicas=_offline(p.replicas, live),
        )
        for _, p in sorted(t.partitions.items())
    ]
    return MetadataResponseTopic(
        error_code=0, name=t.name, topic_id=t.topic_id,
        is_internal=t.name in INTERNAL_TOPICS, partitions=partitions,
    )


def _cached_topic(t: TopicImage, image: MetadataImage) -> MetadataResponseTopic:
    """:func:`_topic`, kept in the image's per-topic cache until the topic changes."""
    derived = image.topic_derived.setdefault(t.name, {})
    answer = derived.get("metadata.topic")
    if answer is None:
        answer = derived["metadata.topic"] = _topic(t, image)
    return answer


def _error_topic(
    name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID
) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


CATCH_UP_WAIT_S = 5.0
"""How long a cluster node that has not yet been in service since it started
(caught up, registered, unfenced) holds a Metadata answer for that: a client
starting with the cluster then gets the brokers and the controller in its
first answer (librdkafka would otherwise wait a whole request timeout for a
controller before its first CreateTopics)."""


# What a request touches, as Kafka's authorizer checks it (broker/net/registry.py).
ACCESS = (
    Access("DESCRIBE", "TOPIC"),
    Access("CREATE", "CLUSTER", "auto-creation; else CREATE on the topic"),
)


@handler(3, (0, 13), access=ACCESS)
async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    state = ctx.broker
    await state.wait_in_service(CATCH_UP_WAIT_S)
    image = state.image
    version = ctx.api_version
    topics: list[MetadataResponseTopic] = []
    wanted = request.topics
    if wanted is None or (version == 0 and not wanted):
        # Built once per metadata change, each topic's part once per change of
        # that topic (10,000 partitions take ~20 ms to build). Response objects
        # are only read by the encoder, so answers can share them.
        cached = image.derived.get("metadata.all_topics")
        if cached is None:
            cached = image.derived["metadata.all_topics"] = [
                _cached_topic(t, image) for _, t in sorted(image.topics.items())
            ]
        topics = cached
        if ctx.authz.enabled:  # topics the principal may not describe are left out
            topics = [t for t in topics if t.name is not None
                      and topic_allowed(ctx, DESCRIBE, t.name)]
    else:
        allow = request.allow_auto_topic_creation if version >= 4 else True
        missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not state.metadata_ready:
            allow = False  # a restarting cluster node: the topic may well exist
            missing = ErrorCode.LEADER_NOT_AVAILABLE
        for item in wanted:
            name = item.name
            if name is None:  # v12: by topic id
                found = image.by_id.get(item.topic_id)
                if found is None:
                    topics.append(_error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, item.topic_id))
                    continue
                name = found
            if not topic_allowed(ctx, DESCRIBE, name):  # before existence, never leaking it
                topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic_name_error(name):
                topics.append(_error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if name not in image.topics and allow:
                if not _may_create(ctx, name):
                    topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                await auto_create(ctx, name)
            t = image.topics.get(name)
            if t is None:
                topics.append(_error_topic(name, missing))
            else:
                topics.append(_topic(t, image))
    brokers = [
        MetadataResponseBroker(node_id=node_id, host=e.host, port=e.port,
                               rack=state.image.brokers[node_id].rack)
        for node_id, e in state.live_endpoints(ctx.listener)
    ]
    response = MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=state.cluster_id,
        controller_id=state.client_controller_id, topics=topics, error_code=0,
    )
    if version >= 8:
        _authorized_operations(ctx, request, response)
    return response


def _may_create(ctx: RequestContext, name: str) -> bool:
    """False when the topic would be auto-created but the principal may not:
    CREATE on the cluster or on the topic (an internal topic, or auto-creation
    off, is not created whoever asks)."""
    if not ctx.authz.enabled or name in INTERNAL_TOPICS:
        return True
    if not ctx.broker.config.get_bool("auto.create.topics.enable"):
        return True
    return cluster_allowed(ctx, CREATE) or topic_allowed(ctx, CREATE, name)


def _authorized_operations(ctx: RequestContext, request: MetadataRequest,
                           response: MetadataResponse) -> None:
    """Fill the authorized-operations fields the client asked for (v8+; the
    cluster's only to v10). Topic answers may be shared (the all-topics cache):
    a topic with its field set is a copy."""
    if request.include_cluster_authorized_operations and ctx.api_version <= 10:
        response.cluster_authorized_operations = authorized_operations(
            ctx, CLUSTER, CLUSTER_NAME)
    if request.include_topic_authorized_operations:
        response.topics = [
            t if t.error_code or t.name is None else dataclasses.replace(
                t, topic_authorized_operations=authorized_operations(ctx, TOPIC, t.name))
            for t in response.topics]

"""The handlers' side of authorization: one helper per pattern of Kafka's
per-resource checks, over the request's ``ctx.authz`` port
(broker/net/context.py). The cluster-level checks a handler declares without a
condition are the ``authorize`` stage's (broker/net/pipeline.py).

Patterns: a set of topics denied an operation (answered with
TOPIC_AUTHORIZATION_FAILED per partition, before existence is checked); one
group, transactional id or the cluster allowed or not; the authorized-operations
bit field (bit *n* set when operation code *n* is allowed; INT_MIN when the
client did not ask). With no authorizer every helper answers "allowed" at the
cost of one attribute read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter
from typing import Any

from odradek.broker.net.context import RequestContext
from odradek.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType

TOPIC = ResourceType.TOPIC.value
GROUP = ResourceType.GROUP.value
CLUSTER = ResourceType.CLUSTER.value
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID.value

READ = AclOperation.READ.value
WRITE = AclOperation.WRITE.value
CREATE = AclOperation.CREATE.value
DELETE = AclOperation.DELETE.value
ALTER = AclOperation.ALTER.value
DESCRIBE = AclOperation.DESCRIBE.value
CLUSTER_ACTION = AclOperation.CLUSTER_ACTION.value
DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS.value
ALTER_CONFIGS = AclOperation.ALTER_CONFIGS.value
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE.value

NOT_REQUESTED = -(2**31)
"""The authorized-operations value when the client did not ask for it."""

_NONE: frozenset[str] = frozenset()

OPS_BY_TYPE: dict[int, tuple[int, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DELETE, DESCRIBE),
    CLUSTER: (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
              IDEMPOTENT_WRITE),
    TRANSACTIONAL_ID: (WRITE, DESCRIBE),
}
"""The operations Kafka evaluates for an authorized-operations field, by resource type."""


BY_NAME: Callable[[Any], str | None] = attrgetter("name")
BY_TOPIC: Callable[[Any], str | None] = attrgetter("topic")
FIRST: Callable[[Any], str | None] = itemgetter(0)


def denied_topics(ctx: RequestContext, operation: int, items: Iterable[Any],
                  key: Callable[[Any], str | None] | None = None) -> frozenset[str]:
    """The topics the principal may not ``operation``, of ``items`` (topic names,
    or what ``key`` takes a name from: :data:`BY_NAME` for a request's topic
    structs). Empty at once with no authorizer (the produce and fetch path:
    nothing is built). None names (topics unknown by id) are skipped."""
    authz = ctx.authz
    if not authz.enabled:
        return _NONE
    names = set(items) if key is None else {key(i) for i in items}
    return frozenset(n for n in names
                     if n is not None and not authz.allowed(operation, TOPIC, n))


def topic_allowed(ctx: RequestContext, operation: int, name: str) -> bool:
    return ctx.authz.allowed(operation, TOPIC, name)


def group_allowed(ctx: RequestContext, operation: int, group: str) -> bool:
    return ctx.authz.allowed(operation, GROUP, group)


def txn_allowed(ctx: RequestContext, operation: int, transactional_id: str) -> bool:
    return ctx.authz.allowed(operation, TRANSACTIONAL_ID, transactional_id)


def cluster_allowed(ctx: RequestContext, operation: int) -> bool:
    return ctx.authz.allowed(operation, CLUSTER, CLUSTER_NAME)


def authorized_operations(ctx: RequestContext, resource_type: int, name: str,
                          requested: bool = True) -> int:
    """Kafka's authorized-operations bit field for one resource."""
    if not requested:
        return NOT_REQUESTED
    authz = ctx.authz
    bits = 0
    for op in OPS_BY_TYPE[resource_type]:
        if authz.allowed(op, resource_type, name):
            bits |= 1 << op
    return bits


_CONFIG_RESOURCES: dict[int, tuple[int, int]] = {
    2: (TOPIC, 29),        # TOPIC_AUTHORIZATION_FAILED
    4: (CLUSTER, 31),      # BROKER: CLUSTER_AUTHORIZATION_FAILED
    8: (CLUSTER, 31),      # BROKER_LOGGER
    16: (CLUSTER, 31),     # CLIENT_METRICS
    32: (GROUP, 30),       # GROUP_AUTHORIZATION_FAILED
}
"""Config resource type (DescribeConfigs, AlterConfigs) → the ACL resource
type it is checked on and the error a denial gets."""


def config_denied(ctx: RequestContext, operation: int, config_type: int, name: str) -> int:
    """The error for ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
    resource, or 0 when allowed (or the type is one the handler refuses itself)."""
    found = _CONFIG_RESOURCES.get(config_type)
    if found is None:
        return 0
    rtype, code = found
    if ctx.authz.allowed(operation, rtype, CLUSTER_NAME if rtype == CLUSTER else name):
        return 0
    return code

"""The authorizer of the broker shell: Kafka's StandardAuthorizer
(:mod:`odradek.metadata.authorizer`) over the ACLs of this node's metadata
image, with its settings, its readiness and its audit log.

``authorizer.class.name`` = ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``
turns it on (:func:`from_config`); without it every request carries
:data:`~odradek.broker.net.context.ALLOW_ALL` and nothing is checked.
A connection asks :meth:`AclAuthorizer.session` for the port of its principal
and IP (:class:`SessionAuthz`), which handlers and the ``authorize`` stage use
through ``ctx.authz``.

Until the node's metadata has caught up (``metadata_ready``), every principal
but a super user is refused, as Kafka's authorizer is not ready before its
initial ACL load; except CLUSTER_ACTION on the cluster (the quorum's and the
brokers' own requests, which the node needs to catch up at all), decided on
the ACLs replayed so far. (Kafka requires the nodes' principal to be a super
user instead; a cluster whose nodes talk as ``User:ANONYMOUS`` with
``allow.everyone.if.no.acl.found=true`` would otherwise never start.)

Audit: a denial is logged at INFO on ``odradek.authorizer`` (principal,
operation, resource, host), an allowed decision at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.net.context import ALLOW_ALL, Authz
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.metadata.authorizer import Policy, decide, decide_by_type, parse_super_users
from odradek.metadata.image import MetadataImage

CLUSTER_ACTION = AclOperation.CLUSTER_ACTION.value
CLUSTER = ResourceType.CLUSTER.value

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = frozenset({STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"})
"""Accepted values of ``authorizer.class.name`` (ZooKeeper's AclAuthorizer is
taken as the same ACL model)."""

audit = logging.getLogger("odradek.authorizer")


class AclAuthorizer:
    """One per broker: the policy, where the ACLs are (the current image) and
    whether they are loaded."""

    def __init__(self, policy: Policy, image: Callable[[], MetadataImage],
                 ready: Callable[[], bool]) -> None:
        self.policy = policy
        self.image = image
        self.ready = ready

    def session(self, principal: str, host: str) -> Authz:
        """The port of one connection's principal, connected from IP ``host``."""
        return SessionAuthz(self, principal, host)


class SessionAuthz:
    """``ctx.authz`` when an authorizer is configured (see :class:`Authz`)."""

    enabled = True

    def __init__(self, authorizer: AclAuthorizer, principal: str, host: str) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self.superuser = principal in authorizer.policy.super_users

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        if self.superuser:
            return True
        a = self.authorizer
        if not a.ready() and not (operation == CLUSTER_ACTION and resource_type == CLUSTER):
            ok = False
        else:
            ok = decide(a.image().acls, a.policy, self.principal, self.host, operation,
                        resource_type, name)
        self._audit(ok, operation, resource_type, name)
        return ok

    def filter(self, operation: int, resource_type: int, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.allowed(operation, resource_type, n)]

    def allowed_on_any(self, operation: int, resource_type: int) -> bool:
        if self.superuser:
            return True
        a = self.authorizer
        ok = a.ready() and decide_by_type(a.image().acls, a.policy, self.principal, self.host,
                                          operation, resource_type)
        self._audit(ok, operation, resource_type, "*any*")
        return ok

    def for_principal(self, principal: str, host: str) -> Authz:
        return self.authorizer.session(principal, host)

    def _audit(self, ok: bool, operation: int, resource_type: int, name: str) -> None:
        level = logging.DEBUG if ok else logging.INFO
        if audit.isEnabledFor(level):
            audit.log(level, "Principal = %s is %s operation = %s from host = %s "
                      "on resource = %s:%s",
                      self.principal, "Allowed" if ok else "Denied", _op(operation), self.host,
                      _rtype(resource_type), name)


def _op(value: int) -> str:
    try:
        return AclOperation(value).name
    except ValueError:
        return str(value)


def _rtype(value: int) -> str:
    try:
        return ResourceType(value).name
    except ValueError:
        return str(value)


def from_config(config: BrokerConfig, image: Callable[[], MetadataImage],
                ready: Callable[[], bool]) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for; None when it is empty."""
    name = config.get("authorizer.class.name").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: {name!r} is not supported; "
                          f"use {STANDARD_AUTHORIZER} or leave it empty")
    policy = Policy(parse_super_users(config.get("super.users")),
                    config.get_bool("allow.everyone.if.no.acl.found"))
    return AclAuthorizer(policy, image, ready)


__all__ = ["ALLOW_ALL", "AclAuthorizer", "SessionAuthz", "from_config"]

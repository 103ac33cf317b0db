"""The authorization decision, as Kafka's StandardAuthorizer makes it: pure, on
an :class:`~odradek.metadata.acls.AclStore`.

:func:`decide` for one (principal, host, operation, resource):

1. a principal in ``super.users`` is allowed;
2. the bindings that apply to the resource are those of its type whose
   pattern covers its name (LITERAL equal, LITERAL ``*``, PREFIXED prefix);
   of them, those for the principal or ``User:*``, from the host or ``*``,
   with the operation (or ALL) count;
3. a counting DENY denies, whatever ALLOWs there are; else a counting ALLOW
   allows. An ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and
   ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY implies nothing;
4. no binding at all on the resource (any principal, host, operation) falls
   back to ``allow.everyone.if.no.acl.found``; bindings that exist but do not
   count deny.

:func:`decide_by_type` answers "allowed on at least one resource of this type"
(Kafka's authorizeByResourceType, for InitProducerId).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.metadata.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclStore,
    PatternType,
    PermissionType,
)

ALLOW = PermissionType.ALLOW
DENY = PermissionType.DENY
ALL = AclOperation.ALL

IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER, ALL}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS, ALL}),
}
"""For an operation with implications: the ALLOW operations that grant it."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The authorizer's settings: ``super.users`` and ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:CN=x,O=y``)."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def decide(store: AclStore, policy: Policy, principal: str, host: str, operation: int,
           resource_type: int, name: str) -> bool:
    """Whether ``principal`` connected from ``host`` may do ``operation`` on the
    resource (see the module docstring)."""
    if principal in policy.super_users:
        return True
    implied = IMPLIED_BY.get(operation)
    found = False
    allowed = False
    for b in store.applying(resource_type, name):
        found = True
        if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
            continue
        if b.host != WILDCARD and b.host != host:
            continue
        op = b.operation
        if b.permission == DENY:
            if op in (operation, ALL):
                return False
        elif not allowed and (op in (operation, ALL) or (implied is not None and op in implied)):
            allowed = True
    if allowed:
        return True
    return not found and policy.allow_if_no_acl


def decide_by_type(store: AclStore, policy: Policy, principal: str, host: str,
                   operation: int, resource_type: int) -> bool:
    """Whether ``operation`` is allowed on at least one resource of
    ``resource_type``: some ALLOW (LITERAL or PREFIXED) for the principal that
    no DENY covers (a DENY on LITERAL ``*`` covers all; a DENY LITERAL covers
    the same name; a DENY PREFIXED covers names and prefixes it starts). With
    ``allow.everyone.if.no.acl.found``, allowed unless a LITERAL ``*`` DENY
    applies (some resource without ACLs is assumed to exist)."""
    if principal in policy.super_users:
        return True
    deny_literal: set[str] = set()
    deny_prefix: list[str] = []
    allow_literal: list[str] = []
    allow_prefix: list[str] = []
    for b in store.of_type(resource_type):
        if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
            continue
        if b.host != WILDCARD and b.host != host:
            continue
        if b.operation != operation and b.operation != ALL:
            continue
        literal = b.pattern_type == PatternType.LITERAL
        if b.permission == DENY:
            (deny_literal.add(b.name) if literal else deny_prefix.append(b.name))
        else:
            (allow_literal if literal else allow_prefix).append(b.name)
    if WILDCARD in deny_literal:
        return False
    if policy.allow_if_no_acl:
        return True
    for name in allow_literal:
        if name not in deny_literal and not any(name.startswith(p) for p in deny_prefix):
            return True
    return any(not any(prefix.startswith(p) for p in deny_prefix) for prefix in allow_prefix)

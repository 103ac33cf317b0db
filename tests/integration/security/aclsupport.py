"""Helpers of the ACL tests: bindings in one line, waits on conditions."""

from __future__ import annotations

import time
from collections.abc import Callable

from odradek.metadata.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)
Op = AclOperation


def allow(principal: str, rtype: int, name: str, *ops: int, prefixed: bool = False
          ) -> list[AclBinding]:
    """ALLOW bindings for ``principal`` from any host, one per operation."""
    return _bindings(principal, rtype, name, ops, prefixed, PermissionType.ALLOW)


def deny(principal: str, rtype: int, name: str, *ops: int, prefixed: bool = False
         ) -> list[AclBinding]:
    return _bindings(principal, rtype, name, ops, prefixed, PermissionType.DENY)


def on_cluster(principal: str, *ops: int) -> list[AclBinding]:
    return allow(principal, CLUSTER, CLUSTER_NAME, *ops)


def _bindings(principal: str, rtype: int, name: str, ops: tuple[int, ...], prefixed: bool,
              permission: int) -> list[AclBinding]:
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return [AclBinding(rtype, name, pattern, principal, "*", op, permission) for op in ops]


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)

"""The controller's ACL decisions (CreateAcls, DeleteAcls): requests in, records
out; only replay (:meth:`MetadataImage.replay`) changes the image's ACLs.

Validation follows Kafka's AclControlManager: a binding whose resource type,
operation or permission is UNKNOWN or ANY, whose pattern type is not LITERAL
or PREFIXED, or whose resource name is empty is refused with INVALID_REQUEST;
creating a binding that exists already (or twice in one request) succeeds and
writes nothing. Each new binding gets a random Uuid.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclStore,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.access_control_entry_record import AccessControlEntryRecord
from odradek.wire.internal.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)


@dataclass(slots=True)
class ItemResult:
    """One creation's or filter's answer: an error (or NONE), its message and, for a
    deletion, the bindings it removed."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    removed: list[AclBinding] = field(default_factory=list)


def binding_error(b: AclBinding) -> str | None:
    """Why Kafka refuses to store ``b`` (INVALID_REQUEST), or None."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or \
            b.resource_type not in ResourceType._value2member_map_:
        return "Invalid resourceType " + str(b.resource_type)
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + str(b.pattern_type)
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or \
            b.operation not in AclOperation._value2member_map_:
        return "Invalid operation " + str(b.operation)
    if b.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return "Invalid permissionType " + str(b.permission)
    if not b.name:
        return "Resource name should not be empty"
    if ":" not in b.principal:
        return f"Could not parse principal from `{b.principal}` (no colon is present " \
               "separating the principal type from the principal name)"
    if not b.host:
        return "Host should not be empty"
    return None


@dataclass(slots=True)
class AclOutcome:
    """A CreateAcls or DeleteAcls decision: one result per item and the records
    to write (``error`` is always NONE: items fail one by one)."""

    results: list[ItemResult]
    records: list[Any]
    error: ErrorCode = ErrorCode.NONE


def create_acls(store: AclStore, creations: Sequence[AclBinding],
                new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> AclOutcome:
    """One result per creation, in order, and the records that store the new ones."""
    results: list[ItemResult] = []
    records: list[Any] = []
    pending: set[AclBinding] = set()
    for b in creations:
        problem = binding_error(b)
        if problem is not None:
            results.append(ItemResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        results.append(ItemResult())
        if b in store.ids or b in pending:
            continue
        pending.add(b)
        records.append(record_of(new_id(), b))
    return AclOutcome(results, records)


def delete_acls(store: AclStore, filters: Sequence[AclFilter]) -> AclOutcome:
    """One result per filter (the bindings it matched, which it removes), and the
    records that remove them; a binding matched by two filters is removed once
    and reported by both, as Kafka does. A filter with UNKNOWN in it is refused
    with INVALID_REQUEST."""
    results: list[ItemResult] = []
    removed: set[uuid.UUID] = set()
    records: list[Any] = []
    for f in filters:
        if f.unknown():
            results.append(ItemResult(ErrorCode.INVALID_REQUEST,
                                      "The filter contains UNKNOWN elements"))
            continue
        hits = store.matching(f)
        results.append(ItemResult(removed=[b for _i, b in hits]))
        for acl_id, _b in hits:
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
    return AclOutcome(results, records)


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(record.resource_type, record.resource_name, record.pattern_type,
                      record.principal, record.host, record.operation, record.permission_type)


def record_of(acl_id: uuid.UUID, b: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id, resource_type=b.resource_type, resource_name=b.name,
        pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission)

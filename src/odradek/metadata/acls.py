"""ACL bindings: Kafka's enums, the binding and filter model, and the store the
metadata image keeps them in.

Formats: every enum is Kafka's int8 as it travels on the wire and in the
metadata records (``AccessControlEntryRecord``). A binding is a resource
pattern (type, name, LITERAL or PREFIXED) and an entry (principal ``Type:name``,
host an IP string or ``*``, operation, ALLOW or DENY). The cluster resource is
named ``kafka-cluster``; ``*`` as a LITERAL name matches every name, ``User:*``
every principal of type User.

Invariants of :class:`AclStore`: every binding has one id (a random Uuid given
by the controller); an identical binding is stored once; the indexes
(literal by (type, name), prefixed by type and prefix length) hold exactly the
bindings of :attr:`AclStore.by_id`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: ``permission`` of ``operation`` for ``principal`` from ``host`` on
    the resources the pattern (``resource_type``, ``name``, ``pattern_type``) covers."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def describe(self) -> str:
        """One line for logs and the CLI."""
        return (f"{_name(ResourceType, self.resource_type)}:"
                f"{_name(PatternType, self.pattern_type)}:{self.name} {self.principal} "
                f"{_name(PermissionType, self.permission)} "
                f"{_name(AclOperation, self.operation)} from {self.host}")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter. ``None`` in name, principal or host
    matches any value; ANY in an enum matches any value; pattern type MATCH
    matches every binding that applies to the named resource (LITERAL equal,
    LITERAL ``*``, PREFIXED a prefix of the name)."""

    resource_type: int = ResourceType.ANY
    name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = PermissionType.ANY

    def unknown(self) -> bool:
        """True when an enum is UNKNOWN (or a code Kafka does not define): such a
        filter is refused with INVALID_REQUEST."""
        return (not _known(ResourceType, self.resource_type)
                or not _known(PatternType, self.pattern_type)
                or not _known(AclOperation, self.operation)
                or not _known(PermissionType, self.permission))

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        if self.name is not None:
            if pt == PatternType.MATCH:
                if b.pattern_type == PatternType.LITERAL:
                    if b.name != self.name and b.name != WILDCARD:
                        return False
                elif b.pattern_type == PatternType.PREFIXED:
                    if not self.name.startswith(b.name):
                        return False
                else:
                    return False
            elif b.name != self.name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission == PermissionType.ANY or self.permission == b.permission


def _known(enum: type[IntEnum], value: int) -> bool:
    return value != 0 and value in enum._value2member_map_


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


@dataclass(slots=True)
class AclStore:
    """The ACLs of the cluster, indexed for the authorizer: LITERAL bindings by
    (resource type, name) (``*`` under its own name), PREFIXED ones by resource
    type, then by prefix length, then by prefix, so the bindings that apply to a
    name are found with one dict lookup per distinct prefix length."""

    by_id: dict[uuid.UUID, AclBinding] = field(default_factory=dict)
    ids: dict[AclBinding, uuid.UUID] = field(default_factory=dict)
    literal: dict[tuple[int, str], list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[int, dict[int, dict[str, list[AclBinding]]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.by_id)

    def __iter__(self) -> Iterator[tuple[uuid.UUID, AclBinding]]:
        return iter(self.by_id.items())

    def add(self, acl_id: uuid.UUID, b: AclBinding) -> None:
        """Store ``b`` under ``acl_id`` (a second record of the same binding
        replaces the first's id)."""
        old = self.ids.get(b)
        if old is not None:
            self.remove(old)
        self.remove(acl_id)
        self.by_id[acl_id] = b
        self.ids[b] = acl_id
        self._bucket(b, create=True).append(b)  # type: ignore[union-attr]

    def remove(self, acl_id: uuid.UUID) -> AclBinding | None:
        b = self.by_id.pop(acl_id, None)
        if b is None:
            return None
        del self.ids[b]
        bucket = self._bucket(b, create=False)
        if bucket is not None:
            bucket.remove(b)
            if not bucket:
                self._drop_bucket(b)
        return b

    def _bucket(self, b: AclBinding, *, create: bool) -> list[AclBinding] | None:
        if b.pattern_type == PatternType.PREFIXED:
            by_len = self.prefixed.get(b.resource_type)
            if by_len is None:
                if not create:
                    return None
                by_len = self.prefixed[b.resource_type] = {}
            names = by_len.get(len(b.name))
            if names is None:
                if not create:
                    return None
                names = by_len[len(b.name)] = {}
            if create:
                return names.setdefault(b.name, [])
            return names.get(b.name)
        key = (b.resource_type, b.name)
        if create:
            return self.literal.setdefault(key, [])
        return self.literal.get(key)

    def _drop_bucket(self, b: AclBinding) -> None:
        if b.pattern_type != PatternType.PREFIXED:
            del self.literal[(b.resource_type, b.name)]
            return
        by_len = self.prefixed[b.resource_type]
        names = by_len[len(b.name)]
        del names[b.name]
        if not names:
            del by_len[len(b.name)]
            if not by_len:
                del self.prefixed[b.resource_type]

    def applying(self, resource_type: int, name: str) -> Iterator[AclBinding]:
        """Every binding whose pattern covers resource ``name`` of ``resource_type``:
        LITERAL equal, LITERAL ``*``, PREFIXED a prefix of ``name``."""
        literal = self.literal
        if literal:
            found = literal.get((resource_type, name))
            if found:
                yield from found
            if name != WILDCARD:
                found = literal.get((resource_type, WILDCARD))
                if found:
                    yield from found
        by_len = self.prefixed.get(resource_type)
        if by_len:
            n = len(name)
            for length, names in by_len.items():
                if length <= n:
                    found = names.get(name[:length])
                    if found:
                        yield from found

    def of_type(self, resource_type: int) -> Iterator[AclBinding]:
        """Every binding on ``resource_type`` (authorizeByResourceType)."""
        for (rtype, _name), bindings in self.literal.items():
            if rtype == resource_type:
                yield from bindings
        for names in self.prefixed.get(resource_type, {}).values():
            for bindings in names.values():
                yield from bindings

    def matching(self, f: AclFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """(id, binding) of every binding ``f`` matches, in a stable order."""
        return [(i, b) for i, b in self.by_id.items() if f.matches(b)]

"""What the ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) share:
request structs to the model of :mod:`odradek.metadata.acls` and back.

Versions: Kafka 4.0 serves 1–3 (KIP-896 removed v0); v1 adds the pattern type,
v2 is flexible, v3 adds the USER resource type. Without an authorizer
(``authorizer.class.name`` empty) every ACL API answers SECURITY_DISABLED (54).
"""

from __future__ import annotations

from typing import Any

from odradek.metadata.acls import AclBinding, AclFilter

VERSIONS = (1, 3)
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."


def filter_of(f: Any) -> AclFilter:
    """A DescribeAclsRequest or DeleteAclsFilter as an :class:`AclFilter`."""
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)


def binding_of(c: Any) -> AclBinding:
    """An AclCreation as an :class:`AclBinding`."""
    return AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                      c.host, c.operation, c.permission_type)

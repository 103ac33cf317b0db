"""ACLs, client quotas and SCRAM users through the admin protocol.

DescribeAcls / CreateAcls / DeleteAcls, DescribeClientQuotas /
AlterClientQuotas and DescribeUserScramCredentials /
AlterUserScramCredentials, for the web console (the CLI keeps its own
flag-driven forms of them). ACL fields are Kafka's numbers; :data:`RESOURCE_TYPES`,
:data:`PATTERN_TYPES`, :data:`OPERATIONS` and :data:`PERMISSIONS` name them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire import scram
from odradek.wire.messages import create_acls_request as cacl
from odradek.wire.messages import delete_acls_request as dacl
from odradek.wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from odradek.wire.messages.describe_acls_request import DescribeAclsRequest
from odradek.wire.messages.describe_client_quotas_request import (
    DescribeClientQuotasRequest,
)
from odradek.wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)

ACL_VERSION = 3
RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
PERMISSIONS = {2: "DENY", 3: "ALLOW"}
ANY = 1
"""The ANY filter value of every ACL enum."""


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def named(self) -> dict[str, str]:
        """Each field, with Kafka's name for its enums."""
        return {"resource_type": RESOURCE_TYPES.get(self.resource_type, str(self.resource_type)),
                "name": self.name,
                "pattern_type": PATTERN_TYPES.get(self.pattern_type, str(self.pattern_type)),
                "principal": self.principal, "host": self.host,
                "operation": OPERATIONS.get(self.operation, str(self.operation)),
                "permission": PERMISSIONS.get(self.permission, str(self.permission))}


@dataclass(frozen=True, slots=True)
class Quota:
    entity: list[tuple[str, str | None]]
    """(entity type, name; None: the default entity) pairs."""
    key: str
    value: float


async def list_acls(client: KafkaClient) -> list[Acl]:
    """Every ACL (a filter matching all), sorted by resource, principal, operation."""
    resp = await client.request(DescribeAclsRequest(
        ANY, None, ANY, None, None, ANY, ANY), ACL_VERSION)
    check(resp.error_code, resp.error_message)
    out = [Acl(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host,
               a.operation, a.permission_type)
           for res in resp.resources for a in res.acls]
    return sorted(out, key=lambda a: (a.resource_type, a.name, a.principal, a.operation))


async def create_acl(client: KafkaClient, acl: Acl) -> None:
    resp = await client.request(cacl.CreateAclsRequest([cacl.AclCreation(
        acl.resource_type, acl.name, acl.pattern_type, acl.principal, acl.host, acl.operation,
        acl.permission)]), ACL_VERSION)
    for result in resp.results:
        check(result.error_code, result.error_message)


async def delete_acl(client: KafkaClient, acl: Acl) -> int:
    """Delete exactly ``acl``; how many ACLs went."""
    resp = await client.request(dacl.DeleteAclsRequest([dacl.DeleteAclsFilter(
        acl.resource_type, acl.name, acl.pattern_type, acl.principal, acl.host, acl.operation,
        acl.permission)]), ACL_VERSION)
    removed = 0
    for result in resp.filter_results:
        check(result.error_code, result.error_message)
        removed += len(result.matching_acls)
    return removed


async def list_quotas(client: KafkaClient) -> list[Quota]:
    """Every client quota the cluster holds (no component filter, not strict)."""
    resp = await client.request(DescribeClientQuotasRequest(components=[], strict=False), 1)
    check(resp.error_code, resp.error_message)
    return [Quota([(x.entity_type, x.entity_name) for x in e.entity], v.key, v.value)
            for e in resp.entries or [] for v in e.values]


async def alter_quota(client: KafkaClient, entity: list[tuple[str, str | None]], key: str,
                      value: float | None) -> None:
    """Set ``key`` of ``entity`` to ``value`` (None: remove it)."""
    resp = await client.request(AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[OpData(key=key, value=value or 0.0, remove=value is None)])]), 1)
    for entry in resp.entries:
        check(entry.error_code, entry.error_message)


async def list_users(client: KafkaClient) -> list[tuple[str, str, int]]:
    """(user, SCRAM mechanism, iterations) of every SCRAM credential."""
    resp = await client.request(DescribeUserScramCredentialsRequest(users=None), 0)
    check(resp.error_code, resp.error_message)
    rows = []
    for r in resp.results:
        check(r.error_code, r.error_message)
        for c in r.credential_infos:
            mech = scram.BY_ID[c.mechanism].name if c.mechanism in scram.BY_ID else str(
                c.mechanism)
            rows.append((r.user, mech, c.iterations))
    return sorted(rows)


async def upsert_user(client: KafkaClient, name: str, mechanism: str, password: str,
                      iterations: int = 8192) -> None:
    """Set ``name``'s credential for ``mechanism`` (``SCRAM-SHA-256`` or ``-512``),
    salted here with a fresh 16-byte salt: the password never crosses the wire."""
    mech = scram.MECHANISMS[mechanism]
    if not mech.min_iterations <= iterations <= mech.max_iterations:
        raise ValueError(f"iterations must be {mech.min_iterations} to {mech.max_iterations}")
    salt = os.urandom(16)
    salted = scram.salted_password(mech.hash_name, password, salt, iterations)
    resp = await client.request(AlterUserScramCredentialsRequest(upsertions=[
        ScramCredentialUpsertion(name=name, mechanism=mech.id, iterations=iterations,
                                 salt=salt, salted_password=salted)]), 0)
    for result in resp.results:
        check(result.error_code, result.error_message)


async def delete_user(client: KafkaClient, name: str, mechanism: str) -> None:
    resp = await client.request(AlterUserScramCredentialsRequest(deletions=[
        ScramCredentialDeletion(name=name, mechanism=scram.MECHANISMS[mechanism].id)]), 0)
    for result in resp.results:
        check(result.error_code, result.error_message)

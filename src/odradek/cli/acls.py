"""``odradek acls add|list|remove``: ACLs, with ``kafka-acls.sh``'s options.

::

    odradek acls add --allow-principal User:alice --operation Read --topic orders
    odradek acls add --deny-principal User:bob --deny-host 10.0.0.7 --operation All --topic orders
    odradek acls add --allow-principal User:app --producer --topic pay- \\
        --resource-pattern-type prefixed --idempotent
    odradek acls add --allow-principal User:app --consumer --topic orders --group app
    odradek acls list                                  # every ACL
    odradek acls list --topic orders --resource-pattern-type match
    odradek acls list --principal User:alice
    odradek acls remove --allow-principal User:alice --operation Read --topic orders
    odradek acls remove --topic orders                 # every ACL on that literal name

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable)
and ``--cluster``. ``--resource-pattern-type`` is ``literal`` (the default of
add and remove), ``prefixed``, and for list and remove also ``match`` (every
ACL that applies to the name) and ``any`` (the default of list). Operations
are Kafka's names in any case (``Read``, ``IdempotentWrite``, ``ALTER_CONFIGS``);
none given means ``All``. Hosts default to ``*``. ``--producer`` is WRITE,
DESCRIBE and CREATE on the topics (with ``--idempotent`` IDEMPOTENT_WRITE on
the cluster, with ``--transactional-id`` WRITE and DESCRIBE on it);
``--consumer`` is READ and DESCRIBE on the topics and READ on the group.
Talks the wire protocol (CreateAcls, DescribeAcls, DeleteAcls), so it works
against any Kafka-compatible broker.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.metadata.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.wire.messages import create_acls_request as cacl
from odradek.wire.messages import delete_acls_request as dacl
from odradek.wire.messages.describe_acls_request import DescribeAclsRequest

ACL_VERSION = 3
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
            "match": PatternType.MATCH, "any": PatternType.ANY}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    acls = sub.add_parser("acls", help="add, list and remove ACLs")
    verbs = acls.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="create ACLs")
    listing = verbs.add_parser("list", help="ACLs matching the options (all by default)")
    remove = verbs.add_parser("remove", help="delete the ACLs matching the options")
    for parser in (add, listing, remove):
        add_bootstrap(parser)
        parser.add_argument("--topic", action="append", default=[], metavar="NAME")
        parser.add_argument("--group", action="append", default=[], metavar="NAME")
        parser.add_argument("--transactional-id", action="append", default=[], metavar="ID")
        parser.add_argument("--cluster", action="store_true", help="the cluster resource")
        parser.add_argument("--resource-pattern-type", choices=sorted(PATTERNS),
                            default=None, help="literal, prefixed, match or any")
    for parser in (add, remove):
        parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
        parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
        parser.add_argument("--allow-host", action="append", default=[], metavar="IP")
        parser.add_argument("--deny-host", action="append", default=[], metavar="IP")
        parser.add_argument("--operation", action="append", default=[], metavar="OP",
                            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                 "DescribeConfigs, AlterConfigs, IdempotentWrite, All")
    add.add_argument("--producer", action="store_true",
                     help="WRITE, DESCRIBE, CREATE on the topics")
    add.add_argument("--consumer", action="store_true",
                     help="READ, DESCRIBE on the topics and READ on the group")
    add.add_argument("--idempotent", action="store_true",
                     help="with --producer: IDEMPOTENT_WRITE on the cluster")
    listing.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                         help="only the ACLs of this principal")
    add.set_defaults(run=lambda a: with_client(a, lambda c: add_acls(c, a)))
    listing.set_defaults(run=lambda a: with_client(a, lambda c: list_acls(c, a)))
    remove.set_defaults(run=lambda a: with_client(a, lambda c: remove_acls(c, a)))


def operation(name: str) -> int:
    """An operation by Kafka's name in any spelling (``IdempotentWrite``,
    ``IDEMPOTENT_WRITE``, ``idempotent-write``)."""
    key = name.replace("-", "").replace("_", "").upper()
    for op in AclOperation:
        if op.name.replace("_", "") == key and op not in (AclOperation.UNKNOWN, AclOperation.ANY):
            return op.value
    raise CliError(f"unknown operation {name!r}: use Read, Write, Create, Delete, Alter, "
                   "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite "
                   "or All")


def resources(args: argparse.Namespace) -> list[tuple[int, str]]:
    out = [(ResourceType.TOPIC.value, t) for t in args.topic]
    out += [(ResourceType.GROUP.value, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID.value, x) for x in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER.value, CLUSTER_NAME))
    return out


def _pattern(args: argparse.Namespace, default: str, allowed: tuple[str, ...]) -> int:
    name = args.resource_pattern_type or default
    if name not in allowed:
        raise CliError(f"--resource-pattern-type {name} is not allowed here "
                       f"(use {' or '.join(allowed)})")
    return PATTERNS[name].value


def _entries(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(principal, host, permission) for every principal and host given."""
    out: list[tuple[str, str, int]] = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, PermissionType.ALLOW),
            (args.deny_principal, args.deny_host, PermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise CliError(f"principal {principal!r} must be TYPE:NAME, e.g. User:alice")
            out.extend((principal, host, permission.value) for host in (hosts or ["*"]))
    return out


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    entries = _entries(args)
    if not entries:
        raise CliError("name who: --allow-principal or --deny-principal")
    pattern = _pattern(args, "literal", ("literal", "prefixed"))
    wanted: list[tuple[int, str, int]] = []  # (resource type, name, operation)
    if args.producer or args.consumer:
        if not args.topic:
            raise CliError("--producer and --consumer need --topic")
        topic_ops: list[AclOperation] = []
        if args.producer:
            topic_ops += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
            if args.idempotent:
                wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
            wanted += [(ResourceType.TRANSACTIONAL_ID, x, op) for x in args.transactional_id
                       for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        if args.consumer:
            if not args.group:
                raise CliError("--consumer needs --group")
            topic_ops += [AclOperation.READ, AclOperation.DESCRIBE]
            wanted += [(ResourceType.GROUP, g, AclOperation.READ) for g in args.group]
        wanted += [(ResourceType.TOPIC, t, op) for t in args.topic
                   for op in dict.fromkeys(topic_ops)]
    else:
        found = resources(args)
        if not found:
            raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
        ops = [operation(o) for o in args.operation] or [AclOperation.ALL.value]
        wanted = [(rtype, name, op) for rtype, name in found for op in ops]
    out: list[AclBinding] = []
    for rtype, name, op in wanted:
        rpattern = PatternType.LITERAL.value if rtype == ResourceType.CLUSTER else pattern
        out.extend(AclBinding(int(rtype), name, rpattern, principal, host, int(op), permission)
                   for principal, host, permission in entries)
    return list(dict.fromkeys(out))


async def add_acls(client: KafkaClient, args: argparse.Namespace) -> int:
    wanted = bindings_to_add(args)
    resp = await client.request(cacl.CreateAclsRequest([cacl.AclCreation(
        b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
        for b in wanted]), ACL_VERSION)
    for result in resp.results:
        check(result.error_code, result.error_message)
    if args.json:
        emit_json({"added": [_json(b) for b in wanted]})
    else:
        print(f"Added {len(wanted)} ACL{'s' if len(wanted) != 1 else ''}:")
        _table(wanted)
    return 0


def filters(args: argparse.Namespace, *, listing: bool) -> list[AclFilter]:
    found = resources(args)
    if listing:
        pattern = _pattern(args, "any", tuple(PATTERNS))
        principals: list[str | None] = list(args.principal) or [None]
        targets: list[tuple[int, str | None]] = list(found) or [(ResourceType.ANY.value, None)]
        return [AclFilter(rtype, name, pattern if rtype != ResourceType.ANY else
                          PatternType.ANY.value if name is None else pattern, principal)
                for rtype, name in targets for principal in principals]
    if not found:
        raise CliError("name a resource: --topic, --group, --transactional-id or --cluster")
    pattern = _pattern(args, "literal", tuple(PATTERNS))
    entries = _entries(args)
    ops = [operation(o) for o in args.operation] or [AclOperation.ANY.value]
    if not entries:  # every ACL on the resources
        return [AclFilter(rtype, name, pattern, None, None, op, PermissionType.ANY.value)
                for rtype, name in found for op in ops]
    return [AclFilter(rtype, name, pattern, principal, host, op, permission)
            for rtype, name in found for principal, host, permission in entries for op in ops]


async def list_acls(client: KafkaClient, args: argparse.Namespace) -> int:
    seen: dict[AclBinding, None] = {}
    for f in filters(args, listing=True):
        resp = await client.request(DescribeAclsRequest(
            f.resource_type, f.name, f.pattern_type, f.principal, f.host, f.operation,
            f.permission), ACL_VERSION)
        check(resp.error_code, resp.error_message)
        for res in resp.resources:
            for a in res.acls:
                seen[AclBinding(res.resource_type, res.resource_name, res.pattern_type,
                                a.principal, a.host, a.operation, a.permission_type)] = None
    if args.json:
        emit_json([_json(b) for b in seen])
    else:
        _table(list(seen))
    return 0


async def remove_acls(client: KafkaClient, args: argparse.Namespace) -> int:
    wanted = filters(args, listing=False)
    resp = await client.request(dacl.DeleteAclsRequest([dacl.DeleteAclsFilter(
        f.resource_type, f.name, f.pattern_type, f.principal, f.host, f.operation, f.permission)
        for f in wanted]), ACL_VERSION)
    removed: dict[AclBinding, None] = {}
    for result in resp.filter_results:
        check(result.error_code, result.error_message)
        for m in result.matching_acls:
            removed[AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal,
                               m.host, m.operation, m.permission_type)] = None
    if args.json:
        emit_json({"removed": [_json(b) for b in removed]})
    else:
        print(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
        _table(list(removed))
    return 0


def _name(enum: Any, value: int) -> str:
    try:
        return str(enum(value).name)
    except ValueError:
        return str(value)


def _json(b: AclBinding) -> dict[str, str]:
    return {"resource_type": _name(ResourceType, b.resource_type), "name": b.name,
            "pattern_type": _name(PatternType, b.pattern_type), "principal": b.principal,
            "host": b.host, "operation": _name(AclOperation, b.operation),
            "permission": _name(PermissionType, b.permission)}


def _table(bindings: list[AclBinding]) -> None:
    table(["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
          [list(_json(b).values()) for b in sorted(
              bindings, key=lambda b: (b.resource_type, b.name, b.principal, b.operation))])

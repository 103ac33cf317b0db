"""``odradek configs describe|alter``: configs of topics, brokers, cluster defaults
and client quotas, as ``kafka-configs.sh`` shows and changes them.

The entity is one of ``--topic NAME``, ``--broker ID``, ``--broker-defaults``
(the cluster-wide dynamic default of every broker) or a client-quota entity
(``--client-id``/``--client-default``, ``--user``/``--user-default``,
``--ip``/``--ip-default``, handled as ``odradek quotas`` does)::

    odradek configs describe --topic orders            # what is set on the topic
    odradek configs describe --topic orders --all      # every config, with its source
    odradek configs alter --topic orders --add-config retention.ms=3600000
    odradek configs alter --topic orders --add-config cleanup.policy=[compact,delete]
    odradek configs alter --broker-defaults --add-config log.retention.ms=604800000
    odradek configs alter --broker 1 --delete-config log.cleaner.threads
    odradek configs describe --client-id app

``describe`` lists the configs set on the entity (``--all``: every config),
each with its value and source, Kafka's names: DYNAMIC_TOPIC_CONFIG,
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG
(the broker's file or ``--override``), DEFAULT_CONFIG. Sensitive values are
not shown. ``alter`` sends IncrementalAlterConfigs (SET and DELETE); a list
value is written in brackets (``[compact,delete]``). A broker's configs are
asked of that broker (DescribeConfigs); changes go to any broker, which hands
them to the controller in a cluster. Wire protocol only: works against any
Kafka-compatible broker.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli import quotas
from odradek.cli.common import BROKER_RESOURCE, DELETE, SET, TOPIC_RESOURCE, CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    configs = sub.add_parser("configs", help="describe and alter configs of topics, brokers, "
                                              "cluster defaults and client quotas")
    verbs = configs.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="an entity's configs and their sources")
    alter = verbs.add_parser("alter", help="set or delete configs of one entity")
    for parser in (describe, alter):
        add_bootstrap(parser)
        entity = parser.add_argument_group("entity (one of)")
        entity.add_argument("--topic", metavar="NAME")
        entity.add_argument("--broker", type=int, metavar="ID")
        entity.add_argument("--broker-defaults", action="store_true",
                            help="the cluster-wide default of every broker")
        for attr, name in quotas.QUOTA_TYPES:
            entity.add_argument(f"--{name}", dest=attr, metavar="NAME")
            entity.add_argument(f"--{name.split('-')[0]}-default", dest=f"{attr}_default",
                                action="store_true", help=f"the default {name} (quotas)")
    describe.add_argument("--all", action="store_true",
                          help="every config, not only those set on the entity")
    alter.add_argument("--add-config", default="", metavar="K=V,...",
                       help="configs to set; a list value in brackets: k=[a,b]")
    alter.add_argument("--delete-config", default="", metavar="K,...",
                       help="configs to delete (back to the default)")
    describe.set_defaults(run=run)
    alter.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    named = [x for x in (args.topic is not None, args.broker is not None, args.broker_defaults)
             if x]
    quota = bool(quotas.entity(args))
    if len(named) + quota != 1:
        raise CliError("name one entity: --topic NAME, --broker ID, --broker-defaults, or a "
                       "client-quota entity (--client-id, --user, --ip and their -default)")
    if quota:
        work = quotas.describe_quotas if args.verb == "describe" else quotas.alter_quotas
        return with_client(args, lambda c: work(c, args))
    if args.broker is not None and args.broker < 0:
        raise CliError("--broker takes a broker id (0 or more)")
    resource = ((TOPIC_RESOURCE, args.topic) if args.topic is not None
                else (BROKER_RESOURCE, "" if args.broker_defaults else str(args.broker)))
    if args.verb == "describe":
        return with_client(args, lambda c: _describe(c, args, resource))
    ops = parse_ops(args.add_config, args.delete_config)
    return with_client(args, lambda c: _alter(c, args, resource, ops))


def _split(text: str) -> list[str]:
    """``a=1,b=[x,y],c`` -> ``["a=1", "b=[x,y]", "c"]`` (commas inside brackets kept)."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += (ch == "[") - (ch == "]")
        current += ch
    items.append(current)
    return [i.strip() for i in items if i.strip()]


def parse_ops(add: str, delete: str) -> list[AlterableConfig]:
    """The SET and DELETE operations of ``--add-config`` and ``--delete-config``."""
    ops = []
    for item in _split(add):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--add-config expects KEY=VALUE, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        ops.append(AlterableConfig(name=key.strip(), config_operation=SET, value=value))
    for key in _split(delete):
        ops.append(AlterableConfig(name=key, config_operation=DELETE, value=None))
    if not ops:
        raise CliError("nothing to alter: give --add-config and/or --delete-config")
    return ops


def _entity_name(resource: tuple[int, str]) -> str:
    kind, name = resource
    if kind == TOPIC_RESOURCE:
        return f"topic {name}"
    return "the broker defaults" if not name else f"broker {name}"


async def _describe(client: KafkaClient, args: argparse.Namespace,
                    resource: tuple[int, str]) -> int:
    kind, name = resource
    conn = await client.node(int(name)) if kind == BROKER_RESOURCE and name else client.bootstrap
    resp = await conn.request(DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=kind, resource_name=name,
                                           configuration_keys=None)],
        include_synonyms=True), 4, 1)
    (result,) = resp.results
    check(result.error_code, result.error_message or _entity_name(resource))
    own = {TOPIC_RESOURCE: {1}, BROKER_RESOURCE: {2} if name else {3}}[kind]
    rows: list[dict[str, Any]] = []
    for c in sorted(result.configs, key=lambda c: c.name):
        if not args.all and c.config_source not in own:
            continue
        rows.append({"name": c.name, "value": None if c.is_sensitive else c.value,
                     "source": SOURCES.get(c.config_source, str(c.config_source)),
                     "sensitive": c.is_sensitive, "read_only": c.read_only})
    if args.json:
        emit_json({"entity": _entity_name(resource), "configs": rows})
        return 0
    print(f"Configs of {_entity_name(resource)}"
          + ("" if args.all else " (set on it; --all for every config)") + ":")
    table(["NAME", "VALUE", "SOURCE"],
          [[r["name"], "(sensitive)" if r["sensitive"] else r["value"] or "", r["source"]]
           for r in rows])
    return 0


async def _alter(client: KafkaClient, args: argparse.Namespace, resource: tuple[int, str],
                 ops: list[AlterableConfig]) -> int:
    kind, name = resource
    resp = await client.request(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=kind, resource_name=name, configs=ops)]), 1, 0)
    for r in resp.responses:
        check(r.error_code, r.error_message or _entity_name(resource))
    if args.json:
        emit_json({"entity": _entity_name(resource),
                   "set": {o.name: o.value for o in ops if o.config_operation == SET},
                   "deleted": [o.name for o in ops if o.config_operation == DELETE]})
    else:
        print(f"Altered the configs of {_entity_name(resource)}: "
              + ", ".join(f"{o.name}={o.value}" if o.config_operation == SET
                          else f"{o.name} deleted" for o in ops))
    return 0

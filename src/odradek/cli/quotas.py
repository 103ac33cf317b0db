"""``odradek quotas describe|alter``: client quotas, as ``kafka-configs.sh`` sets them.

Entities are named with ``--user NAME`` / ``--user-defaults``, ``--client-id
NAME`` / ``--client-defaults`` and ``--ip ADDRESS`` / ``--ip-defaults``, the
flags of ``kafka-configs.sh`` (which also takes ``--entity-type users
--entity-name NAME`` / ``--entity-default``); ``--client`` is the same as
``--client-id``, and each ``-defaults`` flag may be spelt ``-default``. A user
is a principal's name: ``alice`` for ``User:alice``, ``ANONYMOUS`` for every
client of a PLAINTEXT listener::

    odradek quotas alter --client-id app --add-config producer_byte_rate=1048576
    odradek quotas alter --user alice --add-config producer_byte_rate=1048576
    odradek quotas alter --user alice --client-id app --add-config producer_byte_rate=4e6
    odradek quotas alter --user-defaults --client-defaults --add-config consumer_byte_rate=2e6
    odradek quotas alter --client-id app --delete-config producer_byte_rate
    odradek quotas describe                       # every entity with a quota
    odradek quotas describe --client-id app       # that entity only (strict match)
    odradek quotas describe --user alice --client-defaults

``describe`` with no entity flag lists every entity; with flags it matches
those exactly (a default flag matches the default) and strictly (no other
entity type), as ``kafka-configs.sh --describe`` does. Talks the wire
protocol (DescribeClientQuotas, AlterClientQuotas), so it works against any
Kafka-compatible broker.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from odradek.wire.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)

QUOTA_TYPES = (("user", "user"), ("client_id", "client-id"), ("ip", "ip"))
ALIASES = {"client-id": ["--client"]}
"""Other spellings of ``--<entity type>`` (kafka-configs.sh's ``--client``)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    quotas = sub.add_parser("quotas", help="describe and alter client quotas")
    verbs = quotas.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="quotas by entity")
    alter = verbs.add_parser("alter", help="set or delete quotas of one entity")
    for parser in (describe, alter):
        add_bootstrap(parser)
        for attr, name in QUOTA_TYPES:
            group = parser.add_mutually_exclusive_group()
            group.add_argument(f"--{name}", *ALIASES.get(name, []), dest=attr, metavar="NAME")
            short = name.split("-")[0]
            group.add_argument(f"--{short}-defaults", f"--{short}-default",
                               dest=f"{attr}_default", action="store_true",
                               help=f"the default {name}")
    alter.add_argument("--add-config", default="", metavar="K=V,...",
                       help="quotas to set, e.g. producer_byte_rate=1048576")
    alter.add_argument("--delete-config", default="", metavar="K,...",
                       help="quotas to remove")
    describe.set_defaults(
        run=lambda a: with_client(a, lambda c: describe_quotas(c, a)))
    alter.set_defaults(run=lambda a: with_client(a, lambda c: alter_quotas(c, a)))


def entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for attr, name in QUOTA_TYPES:
        if getattr(args, f"{attr}_default"):
            out.append((name, None))
        elif getattr(args, attr) is not None:
            out.append((name, getattr(args, attr)))
    return out


def _show(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def _number(text: str) -> float:
    return float(text)


def _ops(args: argparse.Namespace) -> list[OpData]:
    ops = []
    for item in filter(None, (x.strip() for x in args.add_config.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--add-config expects KEY=VALUE, got {item!r}")
        try:
            number = _number(value)
        except ValueError:
            raise CliError(f"--add-config: {key.strip()} needs a number, got {value!r}") from None
        ops.append(OpData(key=key.strip(), value=number, remove=False))
    for key in filter(None, (x.strip() for x in args.delete_config.split(","))):
        ops.append(OpData(key=key, value=0.0, remove=True))
    if not ops:
        raise CliError("nothing to alter: give --add-config and/or --delete-config")
    return ops


async def alter_quotas(client: KafkaClient, args: argparse.Namespace) -> int:
    chosen = entity(args)
    if not chosen:
        raise CliError("name an entity: --user/--user-defaults, --client-id/--client-defaults "
                       "or --ip/--ip-defaults")
    ops = _ops(args)
    resp = await client.request(AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in chosen], ops=ops)]), 1)
    for entry in resp.entries:
        check(entry.error_code, entry.error_message)
    if args.json:
        emit_json({"entity": dict(chosen), "altered": [o.key for o in ops]})
    else:
        print(f"Altered quotas of {_show(chosen)}")
    return 0


async def describe_quotas(client: KafkaClient, args: argparse.Namespace) -> int:
    chosen = entity(args)
    components = [ComponentData(entity_type=t, match_type=1 if n is None else 0, match=n)
                  for t, n in chosen]
    resp = await client.request(
        DescribeClientQuotasRequest(components=components, strict=bool(chosen)), 1)
    check(resp.error_code, resp.error_message)
    rows = []
    for e in resp.entries or []:
        pairs = [(x.entity_type, x.entity_name) for x in e.entity]
        for v in e.values:
            rows.append((pairs, v.key, v.value))
    if args.json:
        emit_json([{"entity": [{"type": t, "name": n} for t, n in pairs], "key": k, "value": v}
                   for pairs, k, v in rows])
        return 0
    table(["ENTITY", "QUOTA", "VALUE"],
          [[_show(pairs), k, f"{v:.15g}"] for pairs, k, v in rows])
    return 0

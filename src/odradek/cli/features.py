"""``odradek features describe|upgrade|downgrade|disable``: finalized feature
levels (KIP-584), as ``kafka-features.sh`` shows and changes them::

    odradek features describe
    odradek features upgrade --feature transaction.version=2
    odradek features downgrade --feature transaction.version=1 [--unsafe]
    odradek features disable --feature transaction.version
    odradek features upgrade --feature transaction.version=2 --dry-run

``describe`` reads ApiVersions v4 (every supported feature, its finalized level
and the features epoch) and prints one line per feature, as
``kafka-features.sh describe`` does::

    Feature: transaction.version<TAB>SupportedMinVersion: 0<TAB>SupportedMaxVersion: 2
    <TAB>FinalizedVersionLevel: 2<TAB>Epoch: 2          (one line)

(``--json``: a list of objects with those fields). The others send
UpdateFeatures v1 (upgrade type 1 upgrade, 2 safe downgrade, 3 with
``--unsafe``; ``disable`` is a downgrade to 0; ``--dry-run`` is its
``validate_only``), and print ``NAME was upgraded to N.`` (``can be upgraded``
on a dry run). A refusal is one line and exit 1.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    features = sub.add_parser("features", help="describe and change finalized feature levels")
    verbs = features.add_subparsers(dest="verb", required=True)
    describe = verbs.add_parser("describe", help="supported and finalized feature levels")
    add_bootstrap(describe)
    describe.set_defaults(run=lambda a: with_client(a, lambda c: describe_features(c, a)))
    for verb, what in (("upgrade", "raise"), ("downgrade", "lower"), ("disable", "turn off")):
        p = verbs.add_parser(verb, help=f"{what} feature levels")
        p.add_argument("--feature", action="append", required=True,
                       metavar="NAME" if verb == "disable" else "NAME=LEVEL",
                       help="repeatable")
        if verb == "downgrade":
            p.add_argument("--unsafe", action="store_true",
                           help="an unsafe downgrade (metadata may be lost)")
        p.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
        add_bootstrap(p)
        p.set_defaults(run=lambda a, verb=verb: with_client(
            a, lambda c: update_features(c, a, verb)))


async def describe_features(client: KafkaClient, args: argparse.Namespace) -> int:
    resp = await client.request(ApiVersionsRequest(
        client_software_name="odradek-cli", client_software_version="1"), 4)
    check(resp.error_code)
    finalized = {f.name: f.max_version_level for f in resp.finalized_features}
    rows = [{"feature": f.name, "supported_min": f.min_version, "supported_max": f.max_version,
             "finalized": finalized.get(f.name, 0), "epoch": resp.finalized_features_epoch}
            for f in sorted(resp.supported_features, key=lambda f: f.name)]
    if args.json:
        emit_json(rows)
        return 0
    for r in rows:
        print(f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min']}\t"
              f"SupportedMaxVersion: {r['supported_max']}\t"
              f"FinalizedVersionLevel: {r['finalized']}\tEpoch: {r['epoch']}")
    return 0


def _updates(args: argparse.Namespace, verb: str) -> list[tuple[str, int]]:
    out = []
    for text in args.feature:
        if verb == "disable":
            if "=" in text:
                raise CliError(f"--feature {text!r}: disable takes a feature name only")
            out.append((text.strip(), 0))
            continue
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--feature {text!r}: expected NAME=LEVEL")
        try:
            out.append((name.strip(), int(value)))
        except ValueError:
            raise CliError(f"--feature {text!r}: the level must be a whole number") from None
    return out


async def update_features(client: KafkaClient, args: argparse.Namespace, verb: str) -> int:
    updates = _updates(args, verb)
    kind = {"upgrade": UPGRADE, "disable": SAFE_DOWNGRADE}.get(
        verb, UNSAFE_DOWNGRADE if getattr(args, "unsafe", False) else SAFE_DOWNGRADE)
    resp = await client.request(UpdateFeaturesRequest(
        feature_updates=[FeatureUpdateKey(name, level, upgrade_type=kind)
                         for name, level in updates],
        validate_only=args.dry_run), 1)
    check(resp.error_code, resp.error_message)
    for result in resp.results:
        check(result.error_code, result.error_message)
    done = {"upgrade": "upgraded", "downgrade": "downgraded", "disable": "disabled"}[verb]
    if args.json:
        emit_json([{"feature": n, "level": lvl, "dry_run": args.dry_run} for n, lvl in updates])
        return 0
    for name, level in updates:
        if verb == "disable":
            print(f"{name} {'can be' if args.dry_run else 'was'} disabled.")
        elif args.dry_run:
            print(f"{name} can be {done} to {level}.")
        else:
            print(f"{name} was {done} to {level}.")
    return 0

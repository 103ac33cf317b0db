"""``odradek users add|list|remove``: SCRAM users, as ``kafka-configs.sh
--alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users`` sets them::

    odradek users add alice                       # asks for the password
    odradek users add alice --password-file pw.txt --mechanism SCRAM-SHA-512 --iterations 8192
    odradek users list                            # every user and its mechanisms
    odradek users remove alice                    # every mechanism alice has
    odradek users remove alice --mechanism SCRAM-SHA-512

``add`` salts the password here (16 random bytes) and sends the salted
password in AlterUserScramCredentials, as Kafka's admin client does; the
password itself never leaves this process. Works against any broker serving
DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554).
"""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path

from odradek.cli.common import CliError, add_bootstrap
from odradek.cli.output import emit_json, table
from odradek.cli.session import with_client
from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire import scram
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from odradek.wire.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    users = sub.add_parser("users", help="add, list and remove SCRAM users")
    verbs = users.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="create or change a user's SCRAM credential")
    add.add_argument("name")
    add.add_argument("--password-file", type=Path, metavar="FILE",
                     help="read the password from FILE's first line (else asked on the terminal)")
    add.add_argument("--password", help=argparse.SUPPRESS)  # visible to ps: tests only
    add.add_argument("--mechanism", default="SCRAM-SHA-256", type=str.upper,
                     choices=sorted(scram.MECHANISMS))
    add.add_argument("--iterations", type=int, default=4096, help="4096 to 16384 (4096)")
    lst = verbs.add_parser("list", help="users and their SCRAM mechanisms")
    lst.add_argument("names", nargs="*", metavar="NAME")
    rm = verbs.add_parser("remove", help="delete a user's SCRAM credentials")
    rm.add_argument("name")
    rm.add_argument("--mechanism", type=str.upper, choices=sorted(scram.MECHANISMS),
                    help="only this one (default: every mechanism the user has)")
    for parser, run in ((add, add_user), (lst, list_users), (rm, remove_user)):
        add_bootstrap(parser)
        parser.set_defaults(run=lambda a, run=run: with_client(
            a, lambda c: run(c, a)))


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if args.password_file is not None:
        try:
            lines: list[str] = args.password_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CliError(f"cannot read {args.password_file}: {exc.strerror}") from None
        if not lines or not lines[0]:
            raise CliError(f"{args.password_file}: the first line must hold the password")
        return lines[0]
    password: str = getpass.getpass(f"Password for {args.name}: ")
    if not password:
        raise CliError("the password must not be empty")
    return password


async def add_user(client: KafkaClient, args: argparse.Namespace) -> int:
    mech = scram.MECHANISMS[args.mechanism]
    if not mech.min_iterations <= args.iterations <= mech.max_iterations:
        raise CliError(f"--iterations must be {mech.min_iterations} to {mech.max_iterations}")
    salt = os.urandom(16)
    salted = scram.salted_password(mech.hash_name, _password(args), salt, args.iterations)
    resp = await client.request(AlterUserScramCredentialsRequest(upsertions=[
        ScramCredentialUpsertion(name=args.name, mechanism=mech.id, iterations=args.iterations,
                                 salt=salt, salted_password=salted)]), 0)
    for result in resp.results:
        check(result.error_code, result.error_message)
    if args.json:
        emit_json({"user": args.name, "mechanism": mech.name, "iterations": args.iterations})
    else:
        print(f"Set the {mech.name} credential of {args.name}")
    return 0


async def _describe(client: KafkaClient, names: list[str] | None) -> list:  # type: ignore[type-arg]
    resp = await client.request(DescribeUserScramCredentialsRequest(
        users=[UserName(n) for n in names] if names else None), 0)
    check(resp.error_code, resp.error_message)
    for result in resp.results:
        check(result.error_code, result.error_message)
    return list(resp.results)


async def list_users(client: KafkaClient, args: argparse.Namespace) -> int:
    results = await _describe(client, args.names or None)
    rows = [(r.user, scram.BY_ID[c.mechanism].name if c.mechanism in scram.BY_ID
             else str(c.mechanism), str(c.iterations))
            for r in results for c in r.credential_infos]
    if args.json:
        emit_json([{"user": u, "mechanism": m, "iterations": int(i)} for u, m, i in rows])
    else:
        table(["USER", "MECHANISM", "ITERATIONS"], rows)
    return 0


async def remove_user(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.mechanism:
        mechs = [scram.MECHANISMS[args.mechanism].id]
    else:
        mechs = [c.mechanism for r in await _describe(client, [args.name])
                 for c in r.credential_infos]
    resp = await client.request(AlterUserScramCredentialsRequest(deletions=[
        ScramCredentialDeletion(name=args.name, mechanism=m) for m in mechs]), 0)
    for result in resp.results:
        check(result.error_code, result.error_message)
    if args.json:
        emit_json({"user": args.name, "removed": [scram.BY_ID[m].name for m in mechs]})
    else:
        print(f"Removed {', '.join(scram.BY_ID[m].name for m in mechs)} of {args.name}")
    return 0

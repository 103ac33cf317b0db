"""Entry point of the ``odradek`` command.

Each subcommand lives in its own module with a ``register(subparsers)`` that
adds its parser and sets ``run``. When the first argument names a subcommand,
only that module is imported (``odradek serve`` does not load the admin
tools and their client); otherwise, as for ``odradek --help`` or a typo, all
of them are, so help and "invalid choice" list every subcommand. Errors are
one line on stderr and a non-zero exit, never a traceback: :class:`~odradek.cli.common.CliError` and
configuration errors exit 1, bad arguments 2 (argparse), Ctrl-C 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from odradek.broker.config import ConfigError
from odradek.cli.common import CliError

SUBCOMMANDS = (
    "serve", "topics", "produce", "consume", "groups", "transactions", "quotas", "configs",
    "cluster", "users", "acls", "features",
    "dump_log", "storage", "dev", "metadata", "leaders", "console", "connect",
    "reassign",
    "metadata_quorum",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line (which names ``--help`` for the
    usage) instead of the usage followed by the error; exit 2 as argparse."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or only ``command`` when it names one."""
    parser = OneLineParser(prog="odradek", description="Kafka-compatible commit log")
    parser.add_argument("--version", action="version", version=f"odradek {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    # a subcommand's name is its module's with "-" for "_" (dump-log: dump_log)
    module_name = command.replace("-", "_") if command and "_" not in command else None
    names = [module_name] if module_name in SUBCOMMANDS else SUBCOMMANDS
    for name in names:
        try:
            module = importlib.import_module(f"odradek.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"odradek.cli.{name}":
                raise
            continue  # not written yet
        module.register(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("odradek")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except (ConfigError, CliError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `odradek consume ... | head`
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: still one line, with what went wrong
        print(f"odradek: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

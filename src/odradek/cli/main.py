"""Entry point of the ``odradek`` command.

Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="Kafka-compatible commit log")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start a broker (broker and controller in one node)")
    serve.add_argument("properties", nargs="?", help="a server.properties-style file")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a config"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "serve":
        print("odradek: the broker is not built yet (see issue 4)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Entry point of the ``odradek`` command.

Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from odradek.broker.config import BrokerConfig, ConfigError, parse_overrides, read_properties


class CliError(Exception):
    """A failure reported as one line and exit status 1."""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="Kafka-compatible commit log")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start a broker (broker and controller in one node)")
    serve.add_argument("properties", nargs="?", type=Path, help="a server.properties-style file")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a config"
    )
    serve.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def _serve(args: argparse.Namespace) -> int:
    from odradek.broker.app import BrokerApp

    file_props = read_properties(args.properties) if args.properties else None
    config = BrokerConfig.from_sources(file_props, parse_overrides(args.override))
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        loop_factory = None

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        app = BrokerApp(config)
        try:
            await app.start()
        except OSError as exc:
            await app.stop()
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"listener address already in use ({config.get('listeners')})"
                ) from exc
            raise CliError(f"cannot listen on {config.get('listeners')}: {exc.strerror}") from exc
        print(f"odradek: serving on {app.bootstrap_servers}", flush=True)
        try:
            await stop.wait()
        finally:
            await app.stop()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
    except (ConfigError, CliError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

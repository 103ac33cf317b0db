"""``odradek serve``: one broker process (broker and controller in one node)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import signal
from collections.abc import Callable
from pathlib import Path

from odradek.broker.config import BrokerConfig, parse_overrides, read_properties
from odradek.cli.common import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = sub.add_parser("serve", help="start a broker (broker and controller in one node)")
    serve.add_argument("properties", nargs="?", type=Path, help="a server.properties-style file")
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a config"
    )
    serve.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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

"""``odradek console``: the web console (:mod:`odradek.console`).

It connects to ``--bootstrap-server`` with ``--command-config``'s client
security settings (as every other command), listens on ``--listen``, prints
its URL and serves until Ctrl-C or SIGTERM, then stops cleanly (exit 0). No
broker at the address, or the listen port taken, is one line and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from odradek.cli.common import DEFAULT_BOOTSTRAP, CliError, stop_on_signals
from odradek.cli.session import command_security


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("console", help="a web console for the cluster (any Kafka cluster)")
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT")
    p.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                   help="client security settings (TLS, SASL) in Kafka's client properties "
                        "format, as the other commands take")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where the console serves HTTP (default 127.0.0.1:8080; port 0: any)")
    p.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a broker's /metrics, for the overview's charts (one per broker)")
    p.add_argument("--sample-interval", type=float, default=10.0, metavar="SECONDS",
                   help="how often group lag and metrics are sampled for the charts")
    p.set_defaults(run=run)


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise CliError(f"--listen takes HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def run(args: argparse.Namespace) -> int:
    from odradek.client.connection import ClientError, KafkaError
    from odradek.console.app import ConsoleServer
    from odradek.console.state import Console

    host, port = _listen(args.listen)
    if args.sample_interval <= 0:
        raise CliError("--sample-interval must be positive")
    state = Console(args.bootstrap_server, command_security(args.command_config),
                    list(args.metrics_url), args.sample_interval)

    async def main() -> None:
        server = ConsoleServer(state, host, port)
        try:
            url = await server.start()
        except (ClientError, KafkaError, TimeoutError) as exc:
            await server.stop()
            text = str(exc) or type(exc).__name__
            raise CliError(text if args.bootstrap_server in text
                           else f"{args.bootstrap_server}: {text}") from None
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        print(f"Odradek console for {args.bootstrap_server} at {url} (Ctrl-C stops it)",
              flush=True)
        stop = stop_on_signals()
        try:
            await stop.wait()
        finally:
            await server.stop()

    asyncio.run(main())
    return 0

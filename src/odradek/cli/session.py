"""Running a subcommand's coroutine against a broker, with one-line errors."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from odradek.broker.config import read_properties
from odradek.cli.common import CliError
from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, KafkaError
from odradek.client.security import PLAINTEXT, ClientSecurity

T = TypeVar("T")

CONNECT_TIMEOUT_S = 4.0
"""How long a command waits for its bootstrap broker to connect and answer
ApiVersions before it says the address is not a Kafka broker."""


def command_security(path: Path | None) -> ClientSecurity:
    """The TLS and SASL settings of ``--command-config FILE`` (Kafka's client
    properties file, :mod:`odradek.client.properties`); plaintext without one."""
    if path is None:
        return PLAINTEXT
    try:
        return ClientSecurity.from_properties(read_properties(path))
    except ValueError as exc:  # ConfigError too
        raise CliError(f"--command-config {path}: {exc}") from None


def with_client(args: argparse.Namespace, work: Callable[[KafkaClient], Awaitable[T]]) -> T:
    """Connect to ``args.bootstrap_server`` with ``args.command_config``'s security
    settings, run ``work``, close; client and Kafka errors become CliError."""
    bootstrap: str = args.bootstrap_server
    security = command_security(getattr(args, "command_config", None))

    async def main() -> T:
        client = await KafkaClient.connect(bootstrap, timeout_s=CONNECT_TIMEOUT_S,
                                           security=security)
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return asyncio.run(main())
    except (ClientError, KafkaError) as exc:
        raise CliError(str(exc)) from exc

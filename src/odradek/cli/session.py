"""Running a subcommand's coroutine against a broker, with one-line errors."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from odradek.cli.common import CliError
from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, KafkaError

T = TypeVar("T")

CONNECT_TIMEOUT_S = 4.0
"""How long a command waits for its bootstrap broker to connect and answer
ApiVersions before it says the address is not a Kafka broker."""


def with_client(bootstrap: str, work: Callable[[KafkaClient], Awaitable[T]]) -> T:
    """Connect, run ``work``, close; client and Kafka errors become CliError."""

    async def main() -> T:
        client = await KafkaClient.connect(bootstrap, timeout_s=CONNECT_TIMEOUT_S)
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return asyncio.run(main())
    except (ClientError, KafkaError) as exc:
        raise CliError(str(exc)) from exc

"""Fixtures: a real broker and the web console talking to it over real sockets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker
from tests.integration.console.support import RunningConsole


@pytest.fixture
def console_broker() -> Iterator[tuple[Broker, RunningConsole]]:
    with Broker() as broker:
        running = RunningConsole(broker.bootstrap_servers)
        try:
            yield broker, running
        finally:
            running.close()

"""A broker with a SASL_PLAINTEXT listener, its SCRAM users created."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker
from tests.integration.security.sasl_support import add_scram_users, sasl_props


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[Broker]:
    with Broker(**sasl_props()) as b:
        add_scram_users(b.bootstrap_servers)
        yield b

"""Fixtures: a real Odradek broker in this process, on an ephemeral port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b

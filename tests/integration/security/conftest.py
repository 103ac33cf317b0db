"""Fixtures of the security tests: a broker with Kafka's StandardAuthorizer,
the principal the tests' clients authenticate as, and client settings for it;
a broker with a SASL_PLAINTEXT listener, its SCRAM users created.

``principal`` is ``User:ANONYMOUS`` (PLAINTEXT); ``client_config`` and
``kafka_python_config`` are where SASL settings go once the listeners
authenticate, so the same tests then run as a named user.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from tests.integration.security.aclsupport import STANDARD
from tests.integration.security.sasl_support import add_scram_users, sasl_props


@pytest.fixture
def principal() -> str:
    """The principal the tests' clients are (ACLs name it)."""
    return "User:ANONYMOUS"


@pytest.fixture
def secured() -> Iterator[Broker]:
    """A broker enforcing ACLs, nobody a super user, nothing allowed without an ACL."""
    with Broker(**{"authorizer.class.name": STANDARD,
                   "allow.everyone.if.no.acl.found": "false"}) as b:
        yield b


@pytest.fixture
def client_config(secured: Broker) -> dict[str, Any]:
    """librdkafka settings of a client connecting as ``principal``."""
    return {"bootstrap.servers": secured.bootstrap_servers}


@pytest.fixture
def kafka_python_config(secured: Broker) -> dict[str, Any]:
    """kafka-python / aiokafka settings of a client connecting as ``principal``."""
    return {"bootstrap_servers": secured.bootstrap_servers}


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[Broker]:
    with Broker(**sasl_props()) as b:
        add_scram_users(b.bootstrap_servers)
        yield b

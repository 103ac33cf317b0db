"""pytest fixtures for testing your own Kafka code against a real Odradek broker.

Installed with odradek (the ``pytest11`` entry point), so in any test::

    def test_round_trip(odradek_broker, make_topic):
        topic = make_topic(partitions=3)
        producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
        ...

``odradek_broker`` is a fresh broker per test (a few milliseconds to start);
``odradek_ssl_broker`` a fresh broker whose listener is SSL (development
certificates; ``client_config()`` gives confluent-kafka's settings);
``odradek_broker_session`` one broker for the whole session, faster when
tests do not need isolation (``make_topic`` gives each test its own topics).
``make_topic(name=None, partitions=1, configs=None)`` creates a topic on the
test's broker (the function-scoped one if the test uses it, else the session
one) and returns its name.
``postgres_server`` (session) and ``postgres_url`` (a fresh database per test)
run a private PostgreSQL server from the installed binaries
(:mod:`odradek.testing.postgres`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping

import pytest

from odradek.testing.broker import Broker
from odradek.testing.postgres import postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url"]  # fixtures, re-exported for pytest

_names = itertools.count(1)

MakeTopic = Callable[..., str]


@pytest.fixture
def odradek_broker() -> Iterator[Broker]:
    """A real broker on 127.0.0.1 with a temporary data directory, for one test."""
    with Broker() as broker:
        yield broker


@pytest.fixture
def odradek_ssl_broker() -> Iterator[Broker]:
    """A real broker whose one listener is SSL, with development certificates:
    ``odradek_ssl_broker.client_config()`` are ready confluent-kafka settings
    (``ssl_ca``, ``ssl_certfile``, ``ssl_keyfile`` for other clients)."""
    with Broker(ssl=True) as broker:
        yield broker


@pytest.fixture
def odradek_secure_broker() -> Iterator[Broker]:
    """A real broker as a secured production one: SASL_SSL (PLAIN and SCRAM,
    development certificates) and ACLs on, ``admin`` a super user.
    ``odradek_secure_broker.client_config()`` are the admin's confluent-kafka
    settings; ``Broker(ssl=True, sasl={"alice": "pw"}, acls=True)`` names more
    users."""
    with Broker(ssl=True, sasl=True, acls=True) as broker:
        yield broker


@pytest.fixture(scope="session")
def odradek_broker_session() -> Iterator[Broker]:
    """One real broker shared by every test of the session."""
    with Broker() as broker:
        yield broker


@pytest.fixture
def make_topic(request: pytest.FixtureRequest) -> MakeTopic:
    """Create topics on the test's broker: ``make_topic(partitions=3) -> name``."""
    name_of_fixture = (
        "odradek_broker" if "odradek_broker" in request.fixturenames
        else "odradek_broker_session"
    )
    broker: Broker = request.getfixturevalue(name_of_fixture)

    def make(
        name: str | None = None, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        topic = name or f"topic-{next(_names)}"
        broker.create_topic(topic, partitions, configs)
        return topic

    return make

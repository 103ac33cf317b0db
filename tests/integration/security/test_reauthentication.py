"""KIP-368 re-authentication: the session lifetime is reported, a client
re-authenticates on the same connection, a lapsed session closes it, and
librdkafka keeps producing across re-authentications."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.broker.net.sasl.connection import SaslConnection
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.metadata_request import MetadataRequest
from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.integration.security.sasl_support import (
    RawClient,
    add_scram_users,
    sasl_props,
    unsecured_jws,
)

LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def reauth_broker() -> Iterator[Broker]:
    with Broker(**sasl_props(**{"connections.max.reauth.ms": str(LIFETIME_MS)})) as b:
        add_scram_users(b.bootstrap_servers)
        yield b


def _login(c: RawClient, token: bytes, mech: str = "PLAIN") -> Any:
    assert c.request(SaslHandshakeRequest(mech), 1).error_code == 0
    return c.request(SaslAuthenticateRequest(token), 2)


def test_lifetime_reported_and_same_connection_reauthenticates(reauth_broker: Broker) -> None:
    c = RawClient(reauth_broker.bootstrap_servers)
    try:
        first = _login(c, b"\x00alice\x00alice-secret")
        assert first.error_code == 0 and first.session_lifetime_ms == LIFETIME_MS
        assert c.request(MetadataRequest(topics=None), 12).brokers
        again = _login(c, b"\x00alice\x00alice-secret")
        assert again.error_code == 0 and again.session_lifetime_ms == LIFETIME_MS
        assert c.request(MetadataRequest(topics=None), 12).brokers
    finally:
        c.close()


def test_reauthentication_may_not_change_principal(reauth_broker: Broker) -> None:
    c = RawClient(reauth_broker.bootstrap_servers)
    try:
        assert _login(c, b"\x00alice\x00alice-secret").error_code == 0
        resp = _login(c, b"\x00admin\x00admin-secret")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "principal" in (resp.error_message or "")
        assert c.closed_by_broker()
    finally:
        c.close()


def test_reauthentication_may_not_change_mechanism(reauth_broker: Broker) -> None:
    c = RawClient(reauth_broker.bootstrap_servers)
    try:
        assert _login(c, b"\x00alice\x00alice-secret").error_code == 0
        token = f"n,,\x01auth=Bearer {unsecured_jws('alice')}\x01\x01".encode()
        resp = _login(c, token, "OAUTHBEARER")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.closed_by_broker()
    finally:
        c.close()


def test_expired_session_closes_on_next_request(reauth_broker: Broker) -> None:
    c = RawClient(reauth_broker.bootstrap_servers)
    try:
        assert _login(c, b"\x00alice\x00alice-secret").error_code == 0
        time.sleep(LIFETIME_MS / 1000 + 0.2)  # let the session lapse (the behaviour under test)
        with pytest.raises(ConnectionResetError):
            c.request(MetadataRequest(topics=None), 12)
    finally:
        c.close()


def test_oauthbearer_lifetime_is_capped_by_token_expiry(reauth_broker: Broker) -> None:
    c = RawClient(reauth_broker.bootstrap_servers)
    try:
        token = f"n,,\x01auth=Bearer {unsecured_jws('alice', lifetime_s=1)}\x01\x01".encode()
        resp = _login(c, token, "OAUTHBEARER")
        assert resp.error_code == 0 and 0 <= resp.session_lifetime_ms <= 1000
    finally:
        c.close()


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_keeps_producing_across_reauthentications(reauth_broker: Broker,
                                                             mech: str) -> None:
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    reauth_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": reauth_broker.bootstrap_servers,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                         "sasl.username": "alice", "sasl.password": "alice-secret",
                         "linger.ms": 5})
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    sent = 0
    deadline = time.monotonic() + 4 * LIFETIME_MS / 1000
    server = reauth_broker.app.server
    assert server is not None

    def reauthenticated() -> int:
        return max((c.session.reauthentications for c in list(server.connections)
                    if isinstance(c, SaslConnection) and c.session.principal == "User:alice"),
                   default=0)

    seen = 0
    while time.monotonic() < deadline or seen < 2:
        assert time.monotonic() < deadline + 10, "no re-authentication seen"
        producer.produce(topic, f"m{sent}".encode(), callback=report)
        sent += 1
        producer.poll(0.02)
        seen = max(seen, reauthenticated())
    assert producer.flush(20) == 0
    producer.close()
    assert errors == []
    assert seen >= 2


def test_odradek_client_reauthenticates_by_itself(reauth_broker: Broker) -> None:
    import asyncio

    from odradek.client.connection import Connection
    from odradek.client.security import ClientSecurity

    server = reauth_broker.app.server
    assert server is not None
    security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                              sasl_username="bob", sasl_password="bob-secret")

    async def run() -> int:
        conn = await Connection.open(reauth_broker.bootstrap_servers, security=security)
        try:
            assert conn.session_lifetime_ms == LIFETIME_MS
            deadline = time.monotonic() + 3 * LIFETIME_MS / 1000
            while time.monotonic() < deadline:  # requests keep being answered
                assert (await conn.request(MetadataRequest(topics=None), 12)).brokers
                await asyncio.sleep(0.05)
            return max(c.session.reauthentications for c in list(server.connections)
                       if isinstance(c, SaslConnection) and c.session.principal == "User:bob")
        finally:
            await conn.close()

    assert asyncio.run(run()) >= 2

"""Passwords never leave the broker: DescribeConfigs hides the JAAS config,
and authentication, failed or not, logs no password."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from odradek.testing.broker import Broker
from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.integration.security.sasl_support import RawClient


def test_describe_configs_hides_the_jaas_config(sasl_broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap_servers,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": "admin-secret"})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    jaas = entries["listener.name.sasl.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert not any("secret" in (e.value or "") for e in entries.values())


def test_authentication_logs_no_password(sasl_broker: Broker,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="odradek")
    for token in (b"\x00alice\x00not-the-alice-secret", b"\x00alice\x00alice-secret"):
        c = RawClient(sasl_broker.bootstrap_servers)
        try:
            assert c.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
            c.request(SaslAuthenticateRequest(token), 2)
        finally:
            c.close()
    text = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert "secret" not in text
    for conn in list(sasl_broker.app.server.connections if sasl_broker.app.server else []):
        session = getattr(conn, "session", None)
        assert session is None or "secret" not in repr(session)

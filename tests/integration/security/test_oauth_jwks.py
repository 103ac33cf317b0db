"""OAUTHBEARER with signed JWTs: the broker fetches its JWKS from an HTTP
server started here (sasl.oauthbearer.jwks.endpoint.url), refreshes it, and
real clients authenticate with RS256 tokens."""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from odradek.wire.messages.metadata_request import MetadataRequest
from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.integration.security.sasl_support import RawClient, sasl_props, wait_until
from tests.unit.security.test_oauthbearer import jwks_document, signed_jwt


class _Jwks(http.server.BaseHTTPRequestHandler):
    body = b'{"keys": []}'

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[http.server.HTTPServer]:
    _Jwks.body = jwks_document().encode()
    server = http.server.HTTPServer(("127.0.0.1", 0), _Jwks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def jwt_broker(jwks_server: http.server.HTTPServer) -> Iterator[Broker]:
    url = f"http://127.0.0.1:{jwks_server.server_address[1]}/jwks.json"
    props = sasl_props(**{"sasl.oauthbearer.jwks.endpoint.url": url,
                          "sasl.oauthbearer.jwks.endpoint.refresh.ms": "1000",
                          "sasl.oauthbearer.expected.audience": "kafka",
                          "sasl.oauthbearer.expected.issuer": "https://issuer"})
    with Broker(**props) as b:
        yield b


def _login(broker: Broker, token: str) -> Any:
    c = RawClient(broker.bootstrap_servers)
    try:
        assert c.request(SaslHandshakeRequest("OAUTHBEARER"), 1).error_code == 0
        resp = c.request(SaslAuthenticateRequest(
            f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 2)
        if resp.error_code == 0 and not resp.auth_bytes:
            assert c.request(MetadataRequest(topics=None), 12).brokers
        return resp
    finally:
        c.close()


def test_signed_tokens_accepted_and_bad_ones_refused(jwt_broker: Broker) -> None:
    assert _login(jwt_broker, signed_jwt("RS256", "r1")).error_code == 0
    assert _login(jwt_broker, signed_jwt("ES256", "e1")).error_code == 0
    refused = _login(jwt_broker, signed_jwt(aud="someone-else"))
    assert refused.error_code == 0 and b"invalid_token" in bytes(refused.auth_bytes)
    unsecured = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjo5OTk5OTk5OTk5fQ."
    assert b"invalid_token" in bytes(_login(jwt_broker, unsecured).auth_bytes)


def test_the_key_set_is_refreshed(jwt_broker: Broker) -> None:
    before = _Jwks.body
    try:
        doc = json.loads(before)
        doc["keys"] = [k for k in doc["keys"] if k.get("kid") != "r1"]  # the RSA key goes
        _Jwks.body = json.dumps(doc).encode()
        wait_until(lambda: _login(jwt_broker, signed_jwt()).auth_bytes != b"",
                   what="the broker to drop the removed key")
    finally:
        _Jwks.body = before
    wait_until(lambda: _login(jwt_broker, signed_jwt()).error_code == 0
               and not _login(jwt_broker, signed_jwt()).auth_bytes,
               what="the broker to pick the key up again")


def test_kafka_python_with_signed_tokens(jwt_broker: Broker) -> None:
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return signed_jwt()

    topic = f"jwt-{uuid.uuid4().hex[:6]}"
    jwt_broker.create_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=jwt_broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=Provider())
    try:
        meta = producer.send(topic, b"signed").get(timeout=20)
        assert meta.offset == 0
    finally:
        producer.close()


def test_confluent_kafka_oauth_cb_with_signed_tokens(jwt_broker: Broker) -> None:
    from confluent_kafka import Producer

    def oauth_cb(_config: Any) -> tuple[str, float]:
        return signed_jwt(), time.time() + 300

    topic = f"jwt-{uuid.uuid4().hex[:6]}"
    jwt_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": jwt_broker.bootstrap_servers,
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb})
    delivered: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        delivered.append(err)

    producer.produce(topic, b"signed", callback=report)
    assert producer.flush(20) == 0
    producer.close()
    assert delivered == [None]


def test_an_unreadable_jwks_stops_the_start(tmp_path: Any) -> None:
    from odradek.broker.config import ConfigError

    props = sasl_props(**{"sasl.oauthbearer.jwks.endpoint.url":
                          (tmp_path / "missing.json").as_uri()})
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url: cannot read"):
        Broker(**props).start()

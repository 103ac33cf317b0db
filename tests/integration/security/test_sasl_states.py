"""The SASL states over a raw socket: what is answered before authentication,
handshake v0 raw tokens, failures and fuzzed frames close the connection and
the broker keeps serving."""

from __future__ import annotations

import struct

import pytest

from odradek.client.sasl import ScramClient
from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.metadata_request import MetadataRequest
from odradek.wire.messages.sasl_authenticate_request import SaslAuthenticateRequest
from odradek.wire.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.integration.security.sasl_support import RawClient

PLAIN_ALICE = b"\x00alice\x00alice-secret"


@pytest.fixture
def raw(sasl_broker: Broker):  # type: ignore[no-untyped-def]
    client = RawClient(sasl_broker.bootstrap_servers)
    yield client
    client.close()


def _serving(broker: Broker) -> None:
    """A fresh connection still authenticates and is served."""
    c = RawClient(broker.bootstrap_servers)
    try:
        assert c.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
        assert c.request(SaslAuthenticateRequest(PLAIN_ALICE), 2).error_code == 0
        assert c.request(MetadataRequest(topics=None), 12).brokers
    finally:
        c.close()


def test_only_api_versions_and_sasl_before_authentication(raw: RawClient,
                                                          sasl_broker: Broker) -> None:
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in raw.request(ApiVersionsRequest(), 3).api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)
    with pytest.raises(ConnectionResetError):
        raw.request(MetadataRequest(topics=None), 12)
    _serving(sasl_broker)


def test_metadata_as_first_request_closes(raw: RawClient) -> None:
    with pytest.raises(ConnectionResetError):
        raw.request(MetadataRequest(topics=None), 12)


def test_api_versions_twice_closes(raw: RawClient) -> None:
    raw.request(ApiVersionsRequest(), 3)
    with pytest.raises(ConnectionResetError):
        raw.request(ApiVersionsRequest(), 3)


def test_unknown_mechanism(raw: RawClient) -> None:
    resp = raw.request(SaslHandshakeRequest("GSSAPI"), 1)
    assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert raw.closed_by_broker()


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00nobody\x00alice-secret"])
def test_bad_credentials_fail_generically_and_close(raw: RawClient, token: bytes,
                                                    sasl_broker: Broker) -> None:
    assert raw.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
    resp = raw.request(SaslAuthenticateRequest(token), 2)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # the same sentence for an unknown user and a wrong password
    assert resp.error_message == ("Authentication failed: invalid credentials with SASL "
                                  "mechanism PLAIN")
    assert raw.closed_by_broker()
    _serving(sasl_broker)


def test_another_api_during_authentication_closes(raw: RawClient) -> None:
    assert raw.request(SaslHandshakeRequest("SCRAM-SHA-256"), 1).error_code == 0
    with pytest.raises(ConnectionResetError):
        raw.request(MetadataRequest(topics=None), 12)


def test_second_handshake_during_authentication(raw: RawClient) -> None:
    assert raw.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
    resp = raw.request(SaslHandshakeRequest("PLAIN"), 1)
    assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert raw.closed_by_broker()


def test_authenticate_before_handshake(raw: RawClient) -> None:
    resp = raw.request(SaslAuthenticateRequest(PLAIN_ALICE), 2)
    assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert raw.closed_by_broker()


def test_after_authentication_sasl_requests_are_illegal_state(raw: RawClient) -> None:
    assert raw.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
    resp = raw.request(SaslAuthenticateRequest(PLAIN_ALICE), 1)
    assert resp.error_code == 0 and resp.session_lifetime_ms == 0
    assert raw.request(SaslHandshakeRequest("PLAIN"), 1).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert (raw.request(SaslAuthenticateRequest(PLAIN_ALICE), 1).error_code
            == ErrorCode.ILLEGAL_SASL_STATE)
    assert raw.request(MetadataRequest(topics=None), 12).brokers


def test_handshake_v0_plain_raw_token(raw: RawClient) -> None:
    raw.request(ApiVersionsRequest(), 3)
    resp = raw.request(SaslHandshakeRequest("PLAIN"), 0)
    assert resp.error_code == 0
    raw.send_raw(PLAIN_ALICE)
    assert raw.read_raw() == b""
    assert raw.request(MetadataRequest(topics=None), 12).brokers


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_handshake_v0_scram_raw_tokens(raw: RawClient, mech: str) -> None:
    assert raw.request(SaslHandshakeRequest(mech), 0).error_code == 0
    client = ScramClient(mech, "alice", "alice-secret")
    challenge = None
    while (token := client.respond(challenge)) is not None:
        raw.send_raw(token)
        challenge = raw.read_raw()
    assert raw.request(MetadataRequest(topics=None), 12).brokers


def test_handshake_v0_bad_token_closes_without_answer(raw: RawClient,
                                                      sasl_broker: Broker) -> None:
    assert raw.request(SaslHandshakeRequest("PLAIN"), 0).error_code == 0
    raw.send_raw(b"\x00alice\x00wrong")
    assert raw.closed_by_broker()
    _serving(sasl_broker)


def test_oversized_frame_before_authentication_closes(raw: RawClient,
                                                      sasl_broker: Broker) -> None:
    # sasl.server.max.receive.size (524288) bounds frames before authentication
    raw.sock.sendall(struct.pack(">i", 524289) + b"\x00" * 64)
    assert raw.closed_by_broker()
    _serving(sasl_broker)


def _scram_first(raw: RawClient, mech: str = "SCRAM-SHA-256") -> tuple[ScramClient, bytes]:
    assert raw.request(SaslHandshakeRequest(mech), 1).error_code == 0
    client = ScramClient(mech, "alice", "alice-secret")
    first = raw.request(SaslAuthenticateRequest(client.respond(None) or b""), 2)
    assert first.error_code == 0
    return client, bytes(first.auth_bytes)


FUZZ = [
    b"",                                   # empty client-first
    b"n,,n=alice",                         # truncated: no nonce
    b"p=tls-unique,,n=alice,r=abc",        # channel binding asked
    b"n,,n=al=5Bice,r=abc",                # bad name escape
    b"\xff\xfe\x00garbage",                # not UTF-8
    b"c=biws,r=abc,p=AAAA",                # client-final first (out of order)
    b"n,a=bob,n=alice,r=abc",              # authzid is not the user
    b"n,,n=alice,r=abc,tokenauth=true",    # delegation token
]


@pytest.mark.parametrize("token", FUZZ)
def test_fuzzed_scram_client_first(raw: RawClient, token: bytes, sasl_broker: Broker) -> None:
    assert raw.request(SaslHandshakeRequest("SCRAM-SHA-256"), 1).error_code == 0
    resp = raw.request(SaslAuthenticateRequest(token), 2)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert raw.closed_by_broker()
    _serving(sasl_broker)


@pytest.mark.parametrize("final", [
    b"c=biws",                                         # truncated
    b"c=biws,r=wrong-nonce,p=AAAA",                    # nonce mismatch
    b"c=eSws,r={nonce},p=AAAA",                        # channel binding differs
    b"c=biws,r={nonce},p=!!!",                         # proof not base64
    b"c=biws,r={nonce},p=AAAA",                        # wrong proof length
])
def test_fuzzed_scram_client_final(raw: RawClient, final: bytes, sasl_broker: Broker) -> None:
    _client, server_first = _scram_first(raw)
    nonce = server_first.split(b",")[0][2:]
    resp = raw.request(SaslAuthenticateRequest(final.replace(b"{nonce}", nonce)), 2)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert raw.closed_by_broker()
    _serving(sasl_broker)


def test_replayed_scram_client_final_fails(sasl_broker: Broker) -> None:
    first = RawClient(sasl_broker.bootstrap_servers)
    client, server_first = _scram_first(first)
    final = client.respond(server_first) or b""
    assert first.request(SaslAuthenticateRequest(final), 2).error_code == 0
    first.close()
    # the same client-final on another connection (another server nonce)
    second = RawClient(sasl_broker.bootstrap_servers)
    try:
        _scram_first(second)
        resp = second.request(SaslAuthenticateRequest(final), 2)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert second.closed_by_broker()
    finally:
        second.close()
    _serving(sasl_broker)


def test_tokens_of_another_mechanism_fail(raw: RawClient, sasl_broker: Broker) -> None:
    assert raw.request(SaslHandshakeRequest("PLAIN"), 1).error_code == 0
    scram_first = ScramClient("SCRAM-SHA-256", "alice", "alice-secret").respond(None) or b""
    resp = raw.request(SaslAuthenticateRequest(scram_first), 2)
    assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert raw.closed_by_broker()
    _serving(sasl_broker)


def test_scram_message_after_success_is_illegal(raw: RawClient) -> None:
    client, server_first = _scram_first(raw)
    assert raw.request(SaslAuthenticateRequest(client.respond(server_first) or b""),
                       2).error_code == 0
    resp = raw.request(SaslAuthenticateRequest(b"c=biws"), 2)
    assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert raw.request(MetadataRequest(topics=None), 12).brokers


def test_librdkafka_doubled_nonce_is_accepted(raw: RawClient) -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><combined nonce> in client-final."""
    import base64
    import hashlib

    from odradek.wire import scram

    client, server_first = _scram_first(raw)
    attrs = dict(scram.attributes(server_first.decode()))
    cnonce = client._nonce
    doubled = cnonce + attrs["r"]
    h = "sha256"
    salted = scram.salted_password(h, "alice-secret", base64.b64decode(attrs["s"]),
                                   int(attrs["i"]))
    without_proof = f"c=biws,r={doubled}"
    auth = ",".join((client._first_bare, server_first.decode(), without_proof)).encode()
    key = scram.client_key(h, salted)
    proof = scram.xor(key, scram.hmac_(h, hashlib.sha256(key).digest(), auth))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    resp = raw.request(SaslAuthenticateRequest(final), 2)
    assert resp.error_code == 0 and bytes(resp.auth_bytes).startswith(b"v=")


@pytest.mark.parametrize("token", [
    b"n,,\x01auth=Bearer not.a.token\x01\x01",
    b"garbage",
])
def test_oauthbearer_bad_token(raw: RawClient, token: bytes, sasl_broker: Broker) -> None:
    assert raw.request(SaslHandshakeRequest("OAUTHBEARER"), 1).error_code == 0
    resp = raw.request(SaslAuthenticateRequest(token), 2)
    if token == b"garbage":
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    else:  # the JSON error challenge, then failure after the client's \x01
        assert resp.error_code == 0 and b"invalid_token" in bytes(resp.auth_bytes)
        resp = raw.request(SaslAuthenticateRequest(b"\x01"), 2)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "invalid_token" in (resp.error_message or "")
    assert raw.closed_by_broker()
    _serving(sasl_broker)


@pytest.mark.parametrize(("props", "names"), [
    ({}, "sasl.enabled.mechanisms=GSSAPI"),  # Kafka's default, which Odradek does not serve
    ({"sasl.enabled.mechanisms": "PLAIN"}, "PLAIN"),  # PLAIN without users
])
def test_a_listener_with_no_usable_mechanism_stops_the_start(props: dict[str, str],
                                                             names: str) -> None:
    from odradek.broker.config import ConfigError

    base = {"listeners": "SASL://127.0.0.1:0",
            "listener.security.protocol.map": "SASL:SASL_PLAINTEXT", **props}
    with pytest.raises(ConfigError) as info:
        Broker(**base).start()
    message = str(info.value)
    assert "\n" not in message and "listener SASL" in message and names in message

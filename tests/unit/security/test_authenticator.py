"""The per-connection SASL state machine (Kafka's SaslServerAuthenticator rules)."""

from __future__ import annotations

from functools import partial

import pytest

from odradek.broker.net.sasl.authenticator import (
    SaslSession,
    SessionSettings,
    Verdict,
)
from odradek.broker.net.sasl.oauthbearer import OAuthBearerServer, UnsecuredValidator
from odradek.broker.net.sasl.plain import PlainServer
from odradek.wire.errors import ErrorCode
from tests.support.sasl_tokens import unsecured_jws

ALICE = b"\x00alice\x00pw"


def settings(reauth_ms: int = 0) -> SessionSettings:
    servers = {"PLAIN": partial(PlainServer, {"alice": "pw", "bob": "pw"}),
               "OAUTHBEARER": partial(OAuthBearerServer, UnsecuredValidator({}))}
    return SessionSettings(("PLAIN", "OAUTHBEARER"), servers,  # type: ignore[arg-type]
                           {m: reauth_ms for m in servers})


def test_api_versions_once_then_handshake_then_tokens() -> None:
    s = SaslSession(settings())
    assert s.admit(18, 0) is Verdict.PROCEED
    assert s.admit(17, 0) is Verdict.SASL
    hs = s.handshake(1, "PLAIN")
    assert hs.error == 0 and hs.mechanisms == ["PLAIN", "OAUTHBEARER"] and not hs.raw_tokens
    assert s.admit(36, 0) is Verdict.SASL
    answer = s.authenticate(ALICE, 1, 0)
    assert answer.done and answer.error == 0 and answer.session_lifetime_ms == 0
    assert s.principal == "User:alice" and s.authenticated
    assert s.admit(3, 10**12) is Verdict.PROCEED  # no lifetime: never expires
    assert s.admit(17, 0) is Verdict.PROCEED  # the handler answers ILLEGAL_SASL_STATE


@pytest.mark.parametrize("api", [3, 0, 1, 19, 36])
def test_anything_else_first_closes_or_is_illegal(api: int) -> None:
    s = SaslSession(settings())
    verdict = s.admit(api, 0)
    if api == 36:  # answered ILLEGAL_SASL_STATE, then closed
        assert verdict is Verdict.SASL
        answer = s.authenticate(ALICE, 2, 0)
        assert answer.error == ErrorCode.ILLEGAL_SASL_STATE and answer.close_after_delay
    else:
        assert verdict is Verdict.CLOSE
    assert s.state == "failed"
    assert s.admit(18, 0) is Verdict.CLOSE


def test_api_versions_twice_closes() -> None:
    s = SaslSession(settings())
    assert s.admit(18, 0) is Verdict.PROCEED
    assert s.admit(18, 0) is Verdict.CLOSE


def test_unknown_mechanism() -> None:
    s = SaslSession(settings())
    hs = s.handshake(1, "SCRAM-SHA-256")
    assert hs.error == ErrorCode.UNSUPPORTED_SASL_MECHANISM and hs.close
    assert hs.mechanisms == ["PLAIN", "OAUTHBEARER"]


def test_other_api_during_authentication_closes() -> None:
    s = SaslSession(settings())
    s.handshake(1, "PLAIN")
    assert s.admit(3, 0) is Verdict.CLOSE
    assert "ILLEGAL_SASL_STATE" in s.close_reason


def test_handshake_v0_means_raw_tokens() -> None:
    s = SaslSession(settings())
    assert s.handshake(0, "PLAIN").raw_tokens
    bad = s.authenticate(ALICE, 1, 0)  # a SaslAuthenticate after a v0 handshake
    assert bad.error == ErrorCode.ILLEGAL_SASL_STATE
    s = SaslSession(settings())
    s.handshake(0, "PLAIN")
    assert s.authenticate(ALICE, -1, 0).done


def test_failure_is_generic_unless_explicit() -> None:
    s = SaslSession(settings())
    s.handshake(1, "PLAIN")
    answer = s.authenticate(b"\x00alice\x00no", 1, 0)
    assert answer.error == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close_after_delay
    assert answer.message == "Authentication failed: invalid credentials with SASL mechanism PLAIN"
    assert s.admit(36, 0) is Verdict.CLOSE


def test_reauthentication_lifetime_and_rules() -> None:
    s = SaslSession(settings(reauth_ms=1000))
    s.handshake(1, "PLAIN")
    assert s.authenticate(ALICE, 1, 5000).session_lifetime_ms == 1000
    assert s.expiry_ms == 6000
    assert s.admit(3, 5999) is Verdict.PROCEED
    assert s.admit(17, 5500) is Verdict.SASL
    assert s.handshake(1, "PLAIN").error == 0
    assert s.admit(3, 5600) is Verdict.PROCEED  # the old session is still valid
    answer = s.authenticate(ALICE, 2, 5700)
    assert answer.done and s.expiry_ms == 6700 and s.reauthentications == 1
    assert s.admit(3, 6700) is Verdict.CLOSE  # lapsed


def test_v0_authenticate_gets_no_lifetime_but_expires() -> None:
    s = SaslSession(settings(reauth_ms=1000))
    s.handshake(1, "PLAIN")
    assert s.authenticate(ALICE, 0, 0).session_lifetime_ms == 0
    assert s.admit(3, 1000) is Verdict.CLOSE


def test_reauthentication_cannot_change_principal() -> None:
    s = SaslSession(settings(reauth_ms=1000))
    s.handshake(1, "PLAIN")
    s.authenticate(ALICE, 1, 0)
    s.handshake(1, "PLAIN")
    answer = s.authenticate(b"\x00bob\x00pw", 1, 10)
    assert answer.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "principal" in (answer.message or "")


def test_oauthbearer_lifetime_is_the_smaller() -> None:
    s = SaslSession(settings(reauth_ms=10**9))
    s.handshake(1, "OAUTHBEARER")
    import time
    now = int(time.time() * 1000)
    token = f"n,,\x01auth=Bearer {unsecured_jws('alice', lifetime_s=60)}\x01\x01".encode()
    answer = s.authenticate(token, 1, now)
    assert answer.done and s.principal == "User:alice"
    assert 58_000 <= answer.session_lifetime_ms <= 60_000

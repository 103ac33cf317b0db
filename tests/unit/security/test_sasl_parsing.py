"""JAAS strings, PLAIN tokens and a listener's SASL settings."""

from __future__ import annotations

import pytest

from odradek.broker.net.sasl.base import AuthenticationFailed
from odradek.broker.net.sasl.plain import PlainServer, plain_users
from odradek.broker.net.sasl.settings import (
    SaslConfigError,
    inter_broker_sasl,
    listener_settings,
    lookup,
)
from odradek.common.jaas import JaasError, parse_jaas, single_module

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice \\"quoted\\" secret";')


def test_jaas_parses_options_quoted_and_bare() -> None:
    m = single_module(PLAIN_JAAS)
    assert m.module.endswith("PlainLoginModule") and m.flag == "required"
    assert m.options["user_alice"] == 'alice "quoted" secret'
    assert plain_users(m.options) == {"admin": "admin-secret", "alice": 'alice "quoted" secret'}
    assert "secret" not in repr(m)
    bare = single_module("x.Y optional a=b c=\"d e\";")
    assert bare.flag == "optional" and bare.options == {"a": "b", "c": "d e"}
    two = parse_jaas("a.B required; c.D sufficient k=v;")
    assert [x.module for x in two] == ["a.B", "c.D"]


@pytest.mark.parametrize("text", [
    "", "a.B", "a.B sometimes;", "a.B required k=;", "a.B required k=\"v;",
    "a.B required k=v", "a.B required =v;", "a.B required; c.D required;",
])
def test_jaas_errors(text: str) -> None:
    with pytest.raises(JaasError):
        single_module(text)


def _plain(token: bytes) -> PlainServer:
    server = PlainServer({"alice": "pw"})
    server.step(token, 0)
    return server


def test_plain_accepts_and_sets_the_user() -> None:
    assert _plain(b"\x00alice\x00pw").authorization_id == "alice"
    assert _plain(b"alice\x00alice\x00pw").authorization_id == "alice"
    assert "pw" not in repr(_plain(b"\x00alice\x00pw"))


@pytest.mark.parametrize(("token", "explicit"), [
    (b"\x00alice\x00wrong", False), (b"\x00bob\x00pw", False), (b"\x00\x00pw", True),
    (b"\x00alice\x00", True), (b"bob\x00alice\x00pw", True), (b"alice\x00pw", True),
    (b"\x00alice\x00pw\x00x", True), (b"\xff\x00alice\x00pw", True),
])
def test_plain_refuses(token: bytes, explicit: bool) -> None:
    with pytest.raises(AuthenticationFailed) as info:
        _plain(token)
    assert info.value.explicit is explicit


def _get(props: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda key: props.get(key, "")


def test_lookup_prefers_listener_and_mechanism() -> None:
    get = _get({"sasl.jaas.config": "bare", "listener.name.ext.sasl.jaas.config": "listener",
                "listener.name.ext.plain.sasl.jaas.config": "mech"})
    assert lookup(get, "EXT", "sasl.jaas.config", "PLAIN") == "mech"
    assert lookup(get, "EXT", "sasl.jaas.config", "SCRAM-SHA-256") == "listener"
    assert lookup(get, "OTHER", "sasl.jaas.config") == "bare"
    assert lookup(get, "EXT", "connections.max.reauth.ms") == "0"


def _scram(_user: str, _mech: str) -> None:
    return None


def test_listener_settings() -> None:
    get = _get({"sasl.enabled.mechanisms": "gssapi, PLAIN ,SCRAM-SHA-512,OAUTHBEARER",
                "listener.name.ext.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.name.ext.scram-sha-512.connections.max.reauth.ms": "60000"})
    warnings: list[str] = []
    s = listener_settings(get, "EXT", _scram, warn=warnings.append)
    assert s.mechanisms == ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER")
    assert s.reauth_ms == {"PLAIN": 0, "SCRAM-SHA-512": 60000, "OAUTHBEARER": 0}
    assert s.max_receive_size == 524288 and s.failed_delay_ms == 100
    assert warnings and "GSSAPI" in warnings[0]


@pytest.mark.parametrize("props", [
    {},  # Kafka's default: GSSAPI only
    {"sasl.enabled.mechanisms": "PLAIN"},  # PLAIN without users
    {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "broken"},
    {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "soon"},
])
def test_listener_settings_errors_are_one_line(props: dict[str, str]) -> None:
    with pytest.raises(SaslConfigError) as info:
        listener_settings(_get(props), "EXT", _scram)
    assert "\n" not in str(info.value)


class _Node:
    def __init__(self, props: dict[str, str], controllers: list[str]) -> None:
        self.props, self.controllers = props, controllers

    def get(self, key: str) -> str:
        return self.props.get(key, "")

    def controller_listener_names(self) -> list[str]:
        return self.controllers


def test_inter_broker_sasl_identity() -> None:
    node = _Node({"sasl.mechanism.inter.broker.protocol": "PLAIN",
                  "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                  "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
                  "listener.name.controller.scram-sha-512.sasl.jaas.config":
                      'a.ScramLoginModule required username="ctl" password="ctl-pw";'},
                 ["CONTROLLER"])
    assert inter_broker_sasl(node, "INTERNAL") == ("PLAIN", "admin", "admin-secret")
    assert inter_broker_sasl(node, "CONTROLLER") == ("SCRAM-SHA-512", "ctl", "ctl-pw")
    with pytest.raises(SaslConfigError):
        inter_broker_sasl(_Node({}, []), "INTERNAL")  # GSSAPI by default
    with pytest.raises(SaslConfigError):
        inter_broker_sasl(_Node({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, []), "X")

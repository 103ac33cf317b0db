"""Admission of new connections (``odradek.broker.net.connlimits``), on a manual clock."""

from __future__ import annotations

import pytest

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.net.connlimits import ConnectionLimits, parse_ip_overrides


def limits(**overrides: str) -> ConnectionLimits:
    return ConnectionLimits.from_config(BrokerConfig.from_sources(None, overrides))


def test_defaults_admit_everything_and_count_what_is_open() -> None:
    lim = limits()
    for i in range(1000):
        assert lim.admit(f"10.0.0.{i % 7}", i) is None
    assert lim.open_total == 1000 and sum(lim.open_by_ip.values()) == 1000
    for i in range(1000):
        lim.release(f"10.0.0.{i % 7}")
    assert lim.open_total == 0 and not lim.open_by_ip and not lim.rejected


def test_max_connections_counts_every_address() -> None:
    lim = limits(**{"max.connections": "3"})
    assert [lim.admit(ip, 0) for ip in ("a", "b", "c", "d")] == [
        None, None, None, "max.connections"]
    lim.release("b")
    assert lim.admit("d", 0) is None
    assert lim.rejected == {"max.connections": 1}
    assert lim.open_total == 3


def test_per_ip_limit_and_overrides() -> None:
    lim = limits(**{"max.connections.per.ip": "2",
                    "max.connections.per.ip.overrides": "127.0.0.2:4, localhost:0"})
    assert [lim.admit("127.0.0.5", 0) for _ in range(3)] == [None, None,
                                                             "max.connections.per.ip"]
    assert [lim.admit("127.0.0.2", 0) for _ in range(5)] == [None] * 4 + [
        "max.connections.per.ip"]
    assert lim.admit("127.0.0.1", 0) == "max.connections.per.ip"  # localhost:0
    lim.release("127.0.0.5")
    assert lim.admit("127.0.0.5", 0) is None


def test_creation_rate_is_a_token_bucket_of_one_second() -> None:
    lim = limits(**{"max.connection.creation.rate": "10"})
    got = [lim.admit("x", 0) for _ in range(12)]
    assert got.count(None) == 10 and got[-1] == "max.connection.creation.rate"
    assert lim.admit("x", 50) == "max.connection.creation.rate"  # 0.5 token by then
    assert lim.admit("x", 100) is None  # one token back after 100 ms
    assert lim.admit("x", 10_000) is None  # the bucket never holds more than a second's
    assert [lim.admit("x", 10_000) for _ in range(10)].count(None) == 9


@pytest.mark.parametrize("text, message", [
    ("127.0.0.1", "expected HOST:COUNT"),
    ("127.0.0.1:many", "not a number"),
    ("127.0.0.1:-1", "negative"),
    ("no-such-host.invalid:3", "cannot resolve"),
])
def test_bad_overrides_are_one_line_errors(text: str, message: str) -> None:
    def resolve(host: str) -> str:
        if host.endswith(".invalid"):
            raise OSError("unknown host")
        return host

    with pytest.raises(ConfigError, match=message) as info:
        parse_ip_overrides(text, resolve)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("key, value", [
    ("queued.max.request.bytes", "0"), ("queued.max.request.bytes", "-5"),
    ("queued.max.requests", "0"), ("max.connections", "-1"), ("max.connections.per.ip", "x"),
])
def test_bad_limit_values_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_sources(None, {key: value})

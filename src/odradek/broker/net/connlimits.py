"""Which new connections the broker admits: Kafka's connection limits, as plain code.

Configs (Kafka's names and defaults):

- ``max.connections`` (2147483647): connections open at once, every listener together.
- ``max.connections.per.ip`` (2147483647) and ``max.connections.per.ip.overrides``
  (``"host-or-ip:count,..."``; a host name is resolved once, at start-up): open
  connections from one address.
- ``max.connection.creation.rate`` (2147483647 per second): new connections
  accepted per second, every listener together; a token bucket that holds at
  most one second's worth, refilled continuously.
- the ``connection_creation_rate`` client quota of an ip entity (KIP-612, set
  with AlterClientQuotas): the same bucket per address.

A connection beyond any limit is closed at once (the client sees the
connection closed, as for Kafka's per-IP limit) and counted in
:attr:`ConnectionLimits.rejected` by reason. Kafka instead stops accepting
when ``max.connections`` or the creation rate is reached, leaving clients in
the TCP backlog; closing at once frees the backlog and lets the client's own
reconnect backoff do the waiting. Invariant: ``open_total`` equals the sum of
``open_by_ip`` values, both counting admitted connections not yet released.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.broker.config import BrokerConfig, ConfigError

UNLIMITED = 2_147_483_647


def parse_ip_overrides(
    text: str, resolve: Callable[[str], str] = socket.gethostbyname
) -> dict[str, int]:
    """``"hostName:100,127.0.0.1:200"`` → {address: limit}; one-line ConfigError if bad."""
    out: dict[str, int] = {}
    key = "max.connections.per.ip.overrides"
    for item in filter(None, (x.strip() for x in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ConfigError(f"{key}: expected HOST:COUNT, got {item!r}")
        try:
            limit = int(count)
        except ValueError:
            raise ConfigError(f"{key}: {count!r} is not a number in {item!r}") from None
        if limit < 0:
            raise ConfigError(f"{key}: negative count in {item!r}")
        host = host.strip("[]")
        try:
            address = resolve(host)
        except OSError:
            raise ConfigError(f"{key}: cannot resolve host {host!r}") from None
        out[address] = limit
    return out


@dataclass(slots=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    creation_rate: int = UNLIMITED
    open_total: int = 0
    open_by_ip: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    """Connections closed on arrival, by reason (``max.connections``, ...)."""
    _tokens: float = 0.0
    _refilled_ms: int | None = None
    _ip_buckets: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per address: (tokens, when refilled) for ``connection_creation_rate`` quotas."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionLimits:
        limits = cls(
            max_connections=config.get_int("max.connections"),
            max_per_ip=config.get_int("max.connections.per.ip"),
            per_ip_overrides=parse_ip_overrides(config.get("max.connections.per.ip.overrides")),
            creation_rate=config.get_int("max.connection.creation.rate"),
        )
        limits._tokens = float(limits.creation_rate)
        return limits

    def reconfigure(self, config: BrokerConfig) -> None:
        """New limits while running (dynamic broker configs): they apply from the next
        connection; open connections stay, as in Kafka."""
        fresh = ConnectionLimits.from_config(config)
        self.max_connections, self.max_per_ip = fresh.max_connections, fresh.max_per_ip
        self.per_ip_overrides = fresh.per_ip_overrides
        if fresh.creation_rate != self.creation_rate:
            self.creation_rate, self._tokens = fresh.creation_rate, fresh._tokens

    def admit(self, ip: str, now_ms: int, ip_rate: float | None = None) -> str | None:
        """Count a new connection from ``ip`` in, or return the limit it breaks
        (the caller closes it; nothing is counted open then). ``ip_rate`` is the
        address's ``connection_creation_rate`` quota (KIP-612), if it has one."""
        reason = self._check(ip, now_ms)
        if reason is None and ip_rate is not None and not self._take_ip_token(ip, ip_rate, now_ms):
            reason = "connection_creation_rate"
        if reason is not None:
            self.rejected[reason] += 1
            return reason
        self.open_total += 1
        self.open_by_ip[ip] += 1
        return None

    def _check(self, ip: str, now_ms: int) -> str | None:
        if self.creation_rate < UNLIMITED:
            if self._refilled_ms is not None:
                elapsed = max(0, now_ms - self._refilled_ms) / 1000
                self._tokens = min(float(self.creation_rate),
                                   self._tokens + elapsed * self.creation_rate)
            self._refilled_ms = now_ms
            if self._tokens < 1:
                return "max.connection.creation.rate"
            self._tokens -= 1
        if self.open_total >= self.max_connections:
            return "max.connections"
        if self.open_by_ip[ip] >= self.per_ip_overrides.get(ip, self.max_per_ip):
            return "max.connections.per.ip"
        return None

    def _take_ip_token(self, ip: str, rate: float, now_ms: int) -> bool:
        tokens, last = self._ip_buckets.get(ip, (rate, now_ms))
        tokens = min(rate, tokens + max(0, now_ms - last) / 1000 * rate)
        if len(self._ip_buckets) > 10_000:  # forget addresses with full buckets
            self._ip_buckets = {k: v for k, v in self._ip_buckets.items() if v[0] < rate}
        if tokens < 1:
            self._ip_buckets[ip] = (tokens, now_ms)
            return False
        self._ip_buckets[ip] = (tokens - 1, now_ms)
        return True

    def release(self, ip: str) -> None:
        """An admitted connection from ``ip`` closed."""
        self.open_total -= 1
        left = self.open_by_ip[ip] - 1
        if left:
            self.open_by_ip[ip] = left
        else:
            del self.open_by_ip[ip]

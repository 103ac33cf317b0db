"""Listeners as ``listeners`` and ``advertised.listeners`` write them, and the one
error every configuration check raises.

``NAME://HOST:PORT`` entries separated by commas; an IPv6 host in brackets; the
name may hold "_" (SASL_SSL), which a URL scheme may not, so this is no job for
urlsplit. Port 0 binds an ephemeral port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


_LISTENER = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%]*\]|[^:/\[\]]*):([0-9]*)")


def parse_listeners(text: str, key: str) -> list[Listener]:
    """``PLAINTEXT://127.0.0.1:9092,OTHER://:9093`` → listeners (port 0 = ephemeral)."""
    out: list[Listener] = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        match = _LISTENER.fullmatch(item)
        if not match or not match.group(3):
            raise ConfigError(f"{key}: expected NAME://HOST:PORT, got {item!r}")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), match.group(3)
        if int(port) > 65535:
            raise ConfigError(f"{key}: bad port in {item!r}")
        out.append(Listener(name, host, int(port)))
    if not out:
        raise ConfigError(f"{key}: no listener given")
    return out

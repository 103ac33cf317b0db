"""Where this broker reaches another broker (cluster mode).

A broker is reached on its registered ``inter.broker.listener.name`` listener
(else its first), or where ``odradek.inter.broker.address.overrides``
(``ID=HOST:PORT,...``) says: the chaos harness puts a proxy it controls on each
link that way. Used by the replica fetchers and the broker-to-broker channel.
"""

from __future__ import annotations

from odradek.broker.config import BrokerConfig
from odradek.metadata.image import MetadataImage

OVERRIDES = "odradek.inter.broker.address.overrides"


def parse_overrides(raw: str) -> dict[int, str]:
    """``1=127.0.0.1:5000,2=...`` → {1: "127.0.0.1:5000", ...}."""
    out: dict[int, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        node, _, address = item.partition("=")
        out[int(node)] = address
    return out


def broker_address(image: MetadataImage, config: BrokerConfig, node_id: int,
                   overrides: dict[int, str]) -> str | None:
    """Where this broker reaches broker ``node_id`` (None: not registered)."""
    if node_id in overrides:
        return overrides[node_id]
    broker = image.brokers.get(node_id)
    if broker is None:
        return None
    listener = config.get("inter.broker.listener.name") or None
    endpoint = broker.endpoint(listener) or broker.endpoint()
    return f"{endpoint.host}:{endpoint.port}" if endpoint is not None else None

"""What a handler sees of the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.ports import GroupPort, MetadataPort, TxnPort


ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Coordinators:
    """The coordinators' runtimes a handler reaches (built by the composition root,
    broker/app.py)."""

    groups: GroupPort
    txns: TxnPort


@dataclass(slots=True)
class RequestContext:
    broker: MetadataPort
    """The metadata service (broker/ports.py), never the wings themselves."""
    api_version: int
    header: RequestHeader
    client_host: str
    request_size: int = 0
    """Bytes of the request frame (what a produce quota is charged)."""
    throttle_ms: int = 0
    """Set by a handler whose byte-rate quota was exceeded (see broker/net/quotas.py)."""
    waited_s: float = 0.0
    """Time the handler spent waiting (long polls, fsyncs), not charged as request time."""
    listener: str = ""
    """The name of the listener the request came in on (``PLAINTEXT``, ``CONTROLLER``)."""
    security_protocol: str = "PLAINTEXT"
    """That listener's protocol (``listener.security.protocol.map``)."""
    principal: str = ANONYMOUS
    """Who sent it, as ``Type:name`` (Kafka's KafkaPrincipal): ``User:ANONYMOUS``
    on a PLAINTEXT listener; an authenticating listener sets its own."""

    coordinators: Coordinators | None = None
    """The group and transaction coordinators (None only in a handler unit test
    that needs neither)."""

    @property
    def groups(self) -> GroupPort:
        assert self.coordinators is not None
        return self.coordinators.groups

    @property
    def txns(self) -> TxnPort:
        assert self.coordinators is not None
        return self.coordinators.txns

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

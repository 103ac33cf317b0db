"""What a handler sees of the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.metadata.quotas import user_of
from odradek.wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.ports import GroupPort, MetadataPort, ReplicaManagerPort, TxnPort


ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Services:
    """The services a handler reaches besides the metadata (built by the
    composition root, broker/app.py): the replica manager and the coordinators'
    runtimes."""

    replicas: ReplicaManagerPort
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

    services: Services | None = None
    """The replica manager and the coordinators (None only in a handler unit
    test that needs none of them)."""

    @property
    def replicas(self) -> ReplicaManagerPort:
        assert self.services is not None
        return self.services.replicas

    @property
    def groups(self) -> GroupPort:
        assert self.services is not None
        return self.services.groups

    @property
    def txns(self) -> TxnPort:
        assert self.services is not None
        return self.services.txns

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def user(self) -> str:
        """The principal's name, which user quotas are keyed by (``ANONYMOUS`` on a
        PLAINTEXT listener)."""
        return user_of(self.principal)

"""What a handler sees of the request it serves."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.metadata.quotas import user_of
from odradek.wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.ports import GroupPort, MetadataPort, ReplicaManagerPort, TxnPort


ANONYMOUS = "User:ANONYMOUS"


class Authz(Protocol):
    """What a handler asks the authorizer, for the request's principal and host.
    Operations and resource types are Kafka's int8 codes
    (:mod:`odradek.metadata.acls`); names are resource names (the cluster is
    ``kafka-cluster``)."""

    enabled: bool
    """False: no authorizer is configured and everything is allowed."""

    def allowed(self, operation: int, resource_type: int, name: str) -> bool: ...

    def filter(self, operation: int, resource_type: int, names: Iterable[str]) -> list[str]:
        """The names of ``names`` the principal may ``operation``, in order."""
        ...

    def allowed_on_any(self, operation: int, resource_type: int) -> bool:
        """Allowed on at least one resource of the type (authorizeByResourceType)."""
        ...

    def for_principal(self, principal: str, host: str) -> Authz:
        """The same authorizer for another principal and IP (a forwarded request's
        client, Envelope)."""
        ...


class AllowAll:
    """The port when no authorizer is configured: everything is allowed."""

    enabled = False

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        return True

    def filter(self, operation: int, resource_type: int, names: Iterable[str]) -> list[str]:
        return list(names)

    def allowed_on_any(self, operation: int, resource_type: int) -> bool:
        return True

    def for_principal(self, principal: str, host: str) -> Authz:
        return self


ALLOW_ALL: Authz = AllowAll()


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

    authz: Authz = ALLOW_ALL
    """The authorizer, for :attr:`principal` from :attr:`client_host`'s IP
    (broker/net/authz.py); :data:`ALLOW_ALL` when none is configured."""

    services: Services | None = None
    """The replica manager and the coordinators (None only in a handler unit
    test that needs none of them)."""
    channel: Any = None
    """A SASL connection's channel (``broker/net/sasl/stage.py`` SaslChannel),
    through which the pipeline's authenticate stage works; None elsewhere."""

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

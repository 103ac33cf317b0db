"""What a handler sees of the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.state import BrokerState


@dataclass(slots=True)
class RequestContext:
    broker: BrokerState
    api_version: int
    header: RequestHeader
    client_host: str

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

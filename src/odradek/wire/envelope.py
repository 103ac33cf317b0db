"""Envelope (API 58): a request forwarded by a broker to the active controller
with the principal and address of the client who sent it (KIP-590), so the
controller authorizes the request as the client's, not the broker's.

Formats, as Kafka's: ``RequestData`` is the whole inner request frame without
its size prefix (request header and body); ``RequestPrincipal`` is a
``DefaultPrincipalData`` v0 (type, name, token-authenticated) as Kafka's
``DefaultKafkaPrincipalBuilder`` serializes it; ``ClientHostAddress`` is the
client's IP, 4 or 16 bytes. ``ResponseData`` is the inner response frame
without its size prefix (response header and body); the envelope's own
``ErrorCode`` says why there is none (NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from odradek.wire import api
from odradek.wire.frames import encode_request, encode_response
from odradek.wire.messages.default_principal_data import DefaultPrincipalData
from odradek.wire.messages.envelope_request import EnvelopeRequest
from odradek.wire.messages.response_header import ResponseHeader
from odradek.wire.schema import Message

ENVELOPE_KEY = 58
ENVELOPE_VERSION = 0


def wrap(body: Message, version: int, client_id: str | None, principal: str,
         client_ip: str) -> EnvelopeRequest:
    """``body`` at ``version`` in an envelope naming ``principal`` (``Type:name``)
    and ``client_ip``."""
    ptype, _, name = principal.partition(":")
    frame = encode_request(body.API_KEY, version, 0, body, client_id)
    try:
        address = ipaddress.ip_address(client_ip.strip("[]")).packed
    except ValueError:
        address = b""
    return EnvelopeRequest(
        request_data=frame[4:],
        request_principal=DefaultPrincipalData(ptype, name, False).encode(0),
        client_host_address=address)


def principal_of(envelope: EnvelopeRequest) -> str:
    """The inner request's principal as ``Type:name``."""
    data = envelope.request_principal
    if not data:
        return ""
    p, _ = DefaultPrincipalData.decode_from(memoryview(data), 0, 0)
    return f"{p.type}:{p.name}"


def host_of(envelope: EnvelopeRequest) -> str:
    """The client's IP as text ('' when absent or malformed)."""
    try:
        return str(ipaddress.ip_address(bytes(envelope.client_host_address)))
    except ValueError:
        return ""


def response_data(api_key: int, version: int, correlation_id: int, body: Message) -> bytes:
    """The inner response frame, without its size prefix."""
    parts = encode_response(api_key, version, correlation_id, body)
    data = b"".join(bytes(p) if not isinstance(p, (bytes, bytearray)) else p for p in parts)
    return data[4:]


def unwrap_response(api_key: int, version: int, data: bytes) -> Any:
    """The inner response body of an envelope's ``ResponseData``."""
    buf = memoryview(data)
    _header, pos = ResponseHeader.decode_from(buf, 0, api.response_header_version(api_key,
                                                                                  version))
    body, _ = api.response_class(api_key).decode_from(buf, pos, version)
    return body

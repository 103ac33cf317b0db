"""Envelope (API 58): a forwarded request carries the client's principal and IP
(wire/envelope.py), and the controller serves the inner request as the
client's (broker/handlers/k58_envelope.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

from odradek.broker.config import BrokerConfig
from odradek.broker.net import authz as authz_mod
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import registration
from odradek.metadata.acls import AclBinding
from odradek.metadata.image import MetadataImage
from odradek.wire import envelope
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from odradek.wire.messages.describe_client_quotas_response import DescribeClientQuotasResponse
from odradek.wire.messages.envelope_request import EnvelopeRequest
from odradek.wire.messages.request_header import RequestHeader

INNER = DescribeClientQuotasRequest([], False)


def test_wrap_carries_the_request_principal_and_ip() -> None:
    wrapped = envelope.wrap(INNER, 1, "app", "User:alice", "10.1.2.3")
    again = EnvelopeRequest.decode(memoryview(wrapped.encode(0)), 0)
    assert envelope.principal_of(again) == "User:alice"
    assert envelope.host_of(again) == "10.1.2.3"
    assert envelope.host_of(envelope.wrap(INNER, 1, None, "User:a", "::1")) == "::1"
    body = DescribeClientQuotasResponse(error_code=31)
    data = envelope.response_data(48, 1, 7, body)
    assert envelope.unwrap_response(48, 1, data).error_code == 31


class FakeState:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image


def _serve(principal_in_envelope: str, image: MetadataImage) -> Any:
    config = BrokerConfig.from_sources(None, {"authorizer.class.name":
                                              authz_mod.STANDARD_AUTHORIZER})
    authorizer = authz_mod.from_config(config, lambda: image, lambda: True)
    assert authorizer is not None
    sender = authorizer.session("User:broker", "127.0.0.1")
    ctx = RequestContext(cast(Any, FakeState(image)), 0, RequestHeader(request_api_key=58),
                         "127.0.0.1:5000", principal="User:broker", authz=sender)
    reg = registration(58)
    assert reg is not None
    wrapped = envelope.wrap(INNER, 1, "app", principal_in_envelope, "10.1.2.3")
    return asyncio.run(reg.handle(ctx, wrapped))


def test_the_inner_request_is_authorized_as_the_client() -> None:
    image = MetadataImage()
    image.acls.add(uuid.uuid4(), AclBinding(4, "kafka-cluster", 3, "User:broker", "*", 2, 3))
    image.acls.add(uuid.uuid4(), AclBinding(4, "kafka-cluster", 3, "User:alice", "10.1.2.3",
                                            10, 3))  # DESCRIBE_CONFIGS from the client's IP
    allowed = _serve("User:alice", image)
    assert allowed.error_code == 0
    assert envelope.unwrap_response(48, 1, bytes(allowed.response_data)).error_code == 0
    refused = _serve("User:bob", image)  # the broker may, the client may not
    assert refused.error_code == 0
    assert envelope.unwrap_response(48, 1, bytes(refused.response_data)).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def test_a_bad_inner_request_is_refused_in_the_envelope() -> None:
    ctx = RequestContext(cast(Any, None), 0, RequestHeader(request_api_key=58), "x")
    reg = registration(58)
    assert reg is not None
    answer = asyncio.run(reg.handle(ctx, EnvelopeRequest(request_data=b"\x00\x01")))
    assert answer.error_code == ErrorCode.INVALID_REQUEST

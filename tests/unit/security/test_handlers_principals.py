"""Handlers answer each principal by its own ACLs: the same request, from two
principals of one broker, gets two answers (units: the principals a PLAINTEXT
test cannot have)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

from odradek.broker.config import BrokerConfig
from odradek.broker.net import authz as authz_mod
from odradek.broker.net.context import RequestContext
from odradek.broker.net.registry import registration
from odradek.metadata import controller
from odradek.metadata.acls import AclBinding
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import metadata_request as md
from odradek.wire.messages.request_header import RequestHeader


class FakeState:
    """What the Metadata handler reads of the metadata service."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.metadata_ready = True
        self.cluster_id = "c"
        self.client_controller_id = 1
        self.config = BrokerConfig.from_sources(None, {})

    async def wait_in_service(self, timeout_s: float) -> bool:
        return True

    def live_endpoints(self, listener: str = "") -> list[Any]:
        return []


def _image() -> MetadataImage:
    image = MetadataImage()
    for name in ("alices", "bobs"):
        out = controller.create_topic(image, name, 1, 1, {}, node_id=1, default_partitions=1,
                                      topic_id=uuid.uuid4())
        for r in out.records:
            image.replay(r)
    image.acls.add(uuid.uuid4(), AclBinding(2, "alices", 3, "User:alice", "*", 8, 3))
    image.acls.add(uuid.uuid4(), AclBinding(2, "bobs", 3, "User:bob", "*", 3, 3))
    return image


def _metadata(image: MetadataImage, principal: str, request: md.MetadataRequest) -> Any:
    config = BrokerConfig.from_sources(None, {"authorizer.class.name":
                                              authz_mod.STANDARD_AUTHORIZER})
    authorizer = authz_mod.from_config(config, lambda: image, lambda: True)
    assert authorizer is not None
    ctx = RequestContext(cast(Any, FakeState(image)), 12, RequestHeader(request_api_key=3),
                         "10.0.0.1:1", principal=principal,
                         authz=authorizer.session(principal, "10.0.0.1"))
    reg = registration(3)
    assert reg is not None
    return asyncio.run(reg.handle(ctx, request))


def test_each_principal_sees_its_own_topics() -> None:
    image = _image()
    every = md.MetadataRequest(None)
    assert [t.name for t in _metadata(image, "User:alice", every).topics] == ["alices"]
    assert [t.name for t in _metadata(image, "User:bob", every).topics] == ["bobs"]
    assert _metadata(image, "User:eve", every).topics == []
    named = md.MetadataRequest([md.MetadataRequestTopic(name="bobs")],
                               allow_auto_topic_creation=False)
    refused = _metadata(image, "User:alice", named).topics[0]
    assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert refused.partitions == [] and not refused.is_internal
    assert _metadata(image, "User:bob", named).topics[0].error_code == 0

"""The pipeline's ``authorize`` stage (broker/net/pipeline.py): the
cluster-level checks each handler declares, answered with the API's own
error body; and the authorizer port a connection hands its requests
(broker/net/authz.py): readiness, super users, the audit log."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import Any, cast

import pytest

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.net import authz as authz_mod
from odradek.broker.net.context import RequestContext
from odradek.broker.net.pipeline import (
    Authorize,
    Call,
    cluster_checks,
    denied_response,
    error_codes,
)
from odradek.broker.net.registry import load_all
from odradek.metadata.acls import AclBinding
from odradek.metadata.image import MetadataImage
from odradek.wire import api
from odradek.wire.errors import ErrorCode
from odradek.wire.frames import Request
from odradek.wire.messages.request_header import RequestHeader


class Denying:
    """An authorizer port refusing the operations it is given."""

    enabled = True

    def __init__(self, refused: set[int]) -> None:
        self.refused = refused
        self.asked: list[tuple[int, int, str]] = []

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        self.asked.append((operation, resource_type, name))
        return operation not in self.refused

    def filter(self, operation: int, resource_type: int, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.allowed(operation, resource_type, n)]

    def allowed_on_any(self, operation: int, resource_type: int) -> bool:
        return operation not in self.refused


def _call(api_key: int, version: int, authz: Any) -> Call:
    header = RequestHeader(request_api_key=api_key, request_api_version=version)
    ctx = RequestContext(cast(Any, None), version, header, "test", 10, authz=authz)
    body = api.request_class(api_key)()
    return Call(Request(api_key, version, 1, header, body, 10), load_all()[api_key], ctx)


def _sample(api_key: int) -> Any:
    """A request of ``api_key`` with one item where answers are per item."""
    from odradek.wire.messages import alter_client_quotas_request as acq
    from odradek.wire.messages import alter_replica_log_dirs_request as arl
    from odradek.wire.messages import alter_user_scram_credentials_request as aus
    from odradek.wire.messages import create_acls_request as cacl
    from odradek.wire.messages import delete_acls_request as dacl
    from odradek.wire.messages import elect_leaders_request as el
    from odradek.wire.messages import update_features_request as uf
    from odradek.wire.messages import write_txn_markers_request as wtm

    samples = {
        27: wtm.WriteTxnMarkersRequest([wtm.WritableTxnMarker(
            1, 0, True, [wtm.WritableTxnMarkerTopic("t", [0])], 0)]),
        30: cacl.CreateAclsRequest([cacl.AclCreation(2, "a", 3, "User:x", "*", 3, 3)]),
        31: dacl.DeleteAclsRequest([dacl.DeleteAclsFilter(1, None, 1, None, None, 1, 1)]),
        34: arl.AlterReplicaLogDirsRequest([arl.AlterReplicaLogDir(
            "/d", [arl.AlterReplicaLogDirTopic("t", [0])])]),
        43: el.ElectLeadersRequest(0, [el.TopicPartitions("t", [0])]),
        49: acq.AlterClientQuotasRequest([acq.EntryData([acq.EntityData("user", "x")], [])]),
        51: aus.AlterUserScramCredentialsRequest(
            deletions=[aus.ScramCredentialDeletion("x", 1)]),
        57: uf.UpdateFeaturesRequest(feature_updates=[uf.FeatureUpdateKey(
            "transaction.version", 1)]),
    }
    return samples.get(api_key) or api.request_class(api_key)()


CLUSTER_LEVEL = sorted(k for k, reg in load_all().items() if cluster_checks(reg))


def test_the_cluster_level_apis_are_the_expected_ones() -> None:
    assert CLUSTER_LEVEL == [27, 29, 30, 31, 34, 35, 43, 45, 46, 48, 49, 50, 51, 52, 53, 54,
                             55, 56, 57, 58, 59, 62, 63, 67, 80, 81, 82]


@pytest.mark.parametrize("api_key", CLUSTER_LEVEL)
def test_a_refused_request_gets_its_api_error_body_at_every_version(api_key: int) -> None:
    reg = load_all()[api_key]
    for version in range(reg.min_version, reg.max_version + 1):
        body = denied_response(reg, _sample(api_key),
                               ErrorCode.CLUSTER_AUTHORIZATION_FAILED, version)
        decoded = type(body).decode(memoryview(body.encode(version)), version)
        assert (ErrorCode.CLUSTER_AUTHORIZATION_FAILED in error_codes(decoded)
                or (api_key == 35 and version < 3 and not decoded.results))


def test_stage_refuses_before_the_handler_and_passes_what_is_allowed() -> None:
    stage = Authorize(enabled=True)
    reached: list[int] = []

    async def proceed(c: Call) -> Any:
        reached.append(c.api_key)
        return "handled"

    denying = Denying({7})  # ALTER
    answer = asyncio.run(stage(_call(43, 2, denying), proceed))
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and reached == []
    assert denying.asked == [(7, 4, "kafka-cluster")]
    assert asyncio.run(stage(_call(46, 0, Denying(set())), proceed)) == "handled"
    # per-resource APIs are the handler's: the stage asks nothing
    produce = Denying({4})
    assert asyncio.run(stage(_call(3, 12, produce), proceed)) == "handled"
    assert produce.asked == []


def test_stage_is_left_out_without_an_authorizer() -> None:
    assert Authorize().passthrough and not Authorize(enabled=True).passthrough


def _authorizer(props: dict[str, str], image: MetadataImage, ready: list[bool]
                ) -> authz_mod.AclAuthorizer:
    config = BrokerConfig.from_sources(None, props)
    found = authz_mod.from_config(config, lambda: image, lambda: ready[0])
    assert found is not None
    return found


STANDARD = {"authorizer.class.name": authz_mod.STANDARD_AUTHORIZER}


def test_config_turns_it_on_and_refuses_unknown_classes() -> None:
    assert authz_mod.from_config(BrokerConfig.from_sources(None, {}), MetadataImage,
                                 lambda: True) is None
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        authz_mod.from_config(BrokerConfig.from_sources(None, {"authorizer.class.name": "x.Y"}),
                              MetadataImage, lambda: True)
    with pytest.raises(ConfigError, match=r"allow\.everyone"):
        BrokerConfig.from_sources(None, {"allow.everyone.if.no.acl.found": "maybe"})


def test_not_ready_refuses_all_but_super_users(caplog: pytest.LogCaptureFixture) -> None:
    image, ready = MetadataImage(), [False]
    a = _authorizer({**STANDARD, "super.users": "User:admin",
                     "allow.everyone.if.no.acl.found": "true"}, image, ready)
    alice, admin = a.session("User:alice", "10.0.0.1"), a.session("User:admin", "10.0.0.1")
    with caplog.at_level(logging.INFO, logger="odradek.authorizer"):
        assert not alice.allowed(3, 2, "t")
        assert admin.allowed(3, 2, "t")
    # the quorum's and brokers' own requests are decided on the ACLs so far
    assert alice.allowed(9, 4, "kafka-cluster")
    ready[0] = True
    assert alice.allowed(3, 2, "t")  # allow.everyone.if.no.acl.found
    denial = [r for r in caplog.records if r.name == "odradek.authorizer"]
    assert len(denial) == 1 and denial[0].levelno == logging.INFO
    message = denial[0].getMessage()
    assert "User:alice" in message and "Denied" in message and "READ" in message
    assert "10.0.0.1" in message and "TOPIC:t" in message


def test_session_reads_the_current_image_and_logs_allowed_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    holder = [MetadataImage()]
    config = BrokerConfig.from_sources(None, STANDARD)
    a = authz_mod.from_config(config, lambda: holder[0], lambda: True)
    assert a is not None
    s = a.session("User:alice", "10.0.0.1")
    assert not s.allowed(3, 2, "t")
    fresh = MetadataImage()  # a snapshot load replaces the image
    fresh.acls.add(uuid.uuid4(), AclBinding(2, "t", 3, "User:alice", "*", 3, 3))
    holder[0] = fresh
    with caplog.at_level(logging.DEBUG, logger="odradek.authorizer"):
        assert s.allowed(3, 2, "t")
    assert any(r.levelno == logging.DEBUG and "Allowed" in r.getMessage()
               for r in caplog.records)

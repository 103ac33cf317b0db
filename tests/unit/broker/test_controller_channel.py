"""NOT_CONTROLLER answers for every forwarded admin API, per item, at every version."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.control.controller_channel import FORWARDED_APIS
from odradek.broker.net.forward import not_controller_response
from odradek.wire import api
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import add_raft_voter_request as arv
from odradek.wire.messages import alter_client_quotas_request as acq
from odradek.wire.messages import alter_configs_request as ac
from odradek.wire.messages import alter_partition_reassignments_request as apr
from odradek.wire.messages import alter_user_scram_credentials_request as aus
from odradek.wire.messages import create_acls_request as cacl
from odradek.wire.messages import create_partitions_request as cp
from odradek.wire.messages import create_topics_request as ct
from odradek.wire.messages import delete_acls_request as dacl
from odradek.wire.messages import delete_topics_request as dt
from odradek.wire.messages import describe_quorum_request as dq
from odradek.wire.messages import elect_leaders_request as el
from odradek.wire.messages import incremental_alter_configs_request as iac
from odradek.wire.messages import list_partition_reassignments_request as lpr
from odradek.wire.messages import remove_raft_voter_request as rrv
from odradek.wire.messages import update_features_request as uf

REQUESTS = {
    19: ct.CreateTopicsRequest([ct.CreatableTopic("a", 1, 1), ct.CreatableTopic("b", 2, 1)]),
    20: dt.DeleteTopicsRequest(topic_names=["a", "b"]),
    30: cacl.CreateAclsRequest([cacl.AclCreation(2, "a", 3, "User:x", "*", 3, 3)]),
    31: dacl.DeleteAclsRequest([dacl.DeleteAclsFilter(1, None, 1, None, None, 1, 1)]),
    33: ac.AlterConfigsRequest([ac.AlterConfigsResource(2, "a", [])]),
    37: cp.CreatePartitionsRequest([cp.CreatePartitionsTopic("a", 3, None)]),
    43: el.ElectLeadersRequest(1, [el.TopicPartitions("a", [0, 1])]),
    45: apr.AlterPartitionReassignmentsRequest(topics=[apr.ReassignableTopic(
        "a", [apr.ReassignablePartition(0, [1, 2])])]),
    46: lpr.ListPartitionReassignmentsRequest(topics=None),
    44: iac.IncrementalAlterConfigsRequest([iac.AlterConfigsResource(2, "a", [])]),
    49: acq.AlterClientQuotasRequest([acq.EntryData([acq.EntityData("client-id", "x")], [])]),
    51: aus.AlterUserScramCredentialsRequest(
        deletions=[aus.ScramCredentialDeletion("a", 1)],
        upsertions=[aus.ScramCredentialUpsertion("b", 1, 4096, b"s", b"p")]),
    55: dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata", [dq.PartitionData(0)])]),
    57: uf.UpdateFeaturesRequest(feature_updates=[uf.FeatureUpdateKey("transaction.version", 1)]),
    80: arv.AddRaftVoterRequest(None, 1000, 4, uuid.uuid4()),
    81: rrv.RemoveRaftVoterRequest(None, 4, uuid.uuid4()),
}


def test_every_forwarded_api_has_a_request_here() -> None:
    assert set(REQUESTS) == FORWARDED_APIS


@pytest.mark.parametrize("api_key", sorted(FORWARDED_APIS))
def test_not_controller_for_each_item_at_each_version(api_key: int) -> None:
    response = not_controller_response(api_key, REQUESTS[api_key])
    lo, hi = api.APIS[api_key][3]
    for version in range(lo, hi + 1):
        decoded = type(response).decode(memoryview(response.encode(version)), version)
        items: list | None  # type: ignore[type-arg]
        if api_key == 45:  # per partition, inside each topic
            items = [p for t in decoded.responses for p in t.partitions]
        elif api_key == 43:
            items = [p for t in decoded.replica_election_results for p in t.partition_result]
        else:
            items = (getattr(decoded, "topics", None) or getattr(decoded, "responses", None)
                     or getattr(decoded, "results", None) or getattr(decoded, "entries", None)
                     or getattr(decoded, "filter_results", None))
        codes = [i.error_code for i in items] if items else [decoded.error_code]
        assert codes and all(c == ErrorCode.NOT_CONTROLLER for c in codes)
    if api_key in (19, 20):
        assert len(items or []) == 2


class _Quorum:
    def __init__(self, voters: dict[int, tuple[str, int]], leader: int) -> None:
        self.voters = voters
        self.leader_id = leader


def test_a_call_to_a_silent_controller_ends_when_the_leader_moves() -> None:
    """The controller accepts the connection and never answers (cut off by a
    partition, or SIGSTOPped). When the quorum names another leader the call
    ends at once with ControllerUnavailable (the caller retries against the new
    one) instead of waiting out its timeout: a heartbeat stuck like that for
    10 s got every broker fenced by the next controller."""
    import asyncio
    import time

    from odradek.broker.control.controller_channel import ControllerChannel, ControllerUnavailable
    from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest

    async def run() -> float:
        held: list[asyncio.StreamWriter] = []

        async def silent(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            held.append(w)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        quorum = _Quorum({1: ("127.0.0.1", port), 2: ("127.0.0.1", port)}, leader=1)
        channel = ControllerChannel(quorum, 9, timeout_s=10.0)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, setattr, quorum, "leader_id", 2)
        started = time.monotonic()
        with pytest.raises(ControllerUnavailable, match="no longer the active controller"):
            await channel.request(BrokerHeartbeatRequest(broker_id=9), 0)
        took = time.monotonic() - started
        await channel.close()
        for w in held:
            w.close()
        server.close()
        await server.wait_closed()
        return took

    took = asyncio.run(run())
    assert 0.25 < took < 1.5, took


def test_a_call_ends_after_its_own_timeout() -> None:
    import asyncio
    import time

    from odradek.broker.control.controller_channel import ControllerChannel, ControllerUnavailable
    from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest

    async def run() -> float:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        quorum = _Quorum({1: ("127.0.0.1", port)}, leader=1)
        channel = ControllerChannel(quorum, 9, timeout_s=10.0)  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(ControllerUnavailable):
            await channel.request(BrokerHeartbeatRequest(broker_id=9), 0, timeout_s=0.5)
        await channel.close()
        server.close()
        return time.monotonic() - started

    took = asyncio.run(run())
    assert 0.45 < took < 1.5, took


def test_an_elected_but_not_yet_active_controller_sends_nothing_to_itself() -> None:
    """Between its election and its first commit a leader is not the active
    controller; a request it forwarded to itself then would be forwarded again on
    the connection serving the first, and both would wait out the timeout (a
    fresh cluster's first CreateTopics took 11 s this way)."""
    import asyncio
    from types import SimpleNamespace
    from typing import Any, cast

    from odradek.broker.control.controller_channel import (
        ControllerChannel,
        ControllerUnavailable,
    )

    quorum = SimpleNamespace(leader_id=3, voters={1: ("h", 1), 3: ("h", 3)}, is_leader=False)
    channel = ControllerChannel(cast(Any, quorum), 3)
    with pytest.raises(ControllerUnavailable, match="not active yet"):
        asyncio.run(channel.request(ct.CreateTopicsRequest([]), 5, timeout_s=5))
    assert channel.conns.held() == {}  # nothing was connected to

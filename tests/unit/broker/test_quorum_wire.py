"""Every Raft message survives the trip through Kafka's KRaft RPCs (encoded at
the version nodes send, decoded, mapped back)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.broker.control import quorum_wire as qw
from odradek.raft import messages as rm
from odradek.raft.log import Entry, Snapshot
from odradek.raft.voters import Endpoint, Voter, VoterSet, kraft_version_record, voters_record
from odradek.wire import api

REQUESTS: list[Any] = [
    rm.VoteRequest(2, 1, 7, 6, 120, pre_vote=True),
    rm.VoteRequest(3, 1, 8, 7, 0, pre_vote=False),
    rm.BeginEpochRequest(2, 3, 9),
    rm.EndEpochRequest(2, 1, 9, (3, 1)),
    rm.FetchRequest(3, 2, 9, 44, 8),
    rm.FetchSnapshotRequest(3, 2, 9, (40, 8)),
    rm.VoteRequest(2, 1, 7, 6, 120, pre_vote=False, voter_directory_id=uuid.UUID(int=7)),
]

VOTERS = VoterSet.of([Voter(1, uuid.UUID(int=5), (Endpoint("CONTROLLER", "h", 9093),))])
ENTRIES = (Entry(44, 9, (b"leader-change", kraft_version_record(1), voters_record(VOTERS)),
                 control=True), Entry(47, 9, (b"a", b"bc")))
RESPONSES: list[tuple[Any, Any]] = [
    (REQUESTS[0], rm.VoteResponse(1, 2, 7, -1, True, True)),
    (REQUESTS[1], rm.VoteResponse(1, 3, 8, 2, False, False, 94)),
    (REQUESTS[2], rm.BeginEpochResponse(3, 2, 9, 2)),
    (REQUESTS[3], rm.EndEpochResponse(1, 2, 9, -1)),
    (REQUESTS[4], rm.FetchResponse(2, 3, 9, 2, 44, 47, ENTRIES)),
    (REQUESTS[4], rm.FetchResponse(2, 3, 9, 2, 44, 30, diverging=(8, 40))),
    (REQUESTS[4], rm.FetchResponse(2, 3, 9, 2, 44, 30, snapshot_id=(40, 8))),
    (REQUESTS[4], rm.FetchResponse(2, 3, 10, 1, 44, error=74)),
    (REQUESTS[5], rm.FetchSnapshotResponse(2, 3, 9, 2, Snapshot(40, 8, b"image"))),
    (REQUESTS[5], rm.FetchSnapshotResponse(2, 3, 9, 2, error=98)),
]


def _through_wire(api_key: int, message: Any, response: bool) -> Any:
    version = qw.VERSIONS[api_key]
    cls = api.response_class(api_key) if response else api.request_class(api_key)
    return cls.decode(memoryview(message.encode(version)), version)


@pytest.mark.parametrize("msg", REQUESTS, ids=lambda m: type(m).__name__)
def test_requests_round_trip(msg: Any) -> None:
    api_key, body = qw.request_to_kafka(msg, "cluster-x")
    decoded = _through_wire(api_key, body, response=False)
    assert decoded.cluster_id == "cluster-x"
    assert qw.request_from_kafka(api_key, decoded, msg.dst) == msg


@pytest.mark.parametrize("request_msg,msg", RESPONSES, ids=lambda m: type(m).__name__)
def test_responses_round_trip(request_msg: Any, msg: Any) -> None:
    api_key, _ = qw.request_to_kafka(request_msg, "c")
    decoded = _through_wire(api_key, qw.response_to_kafka(msg, 1_700_000_000_000), True)
    assert qw.response_from_kafka(api_key, decoded, request_msg) == msg


def test_requests_for_other_partitions_are_refused() -> None:
    api_key, body = qw.request_to_kafka(REQUESTS[4], "c")
    body.topics[0].partitions[0].partition = 1
    with pytest.raises(ValueError):
        qw.request_from_kafka(api_key, body, 2)
    body.topics[0].topic = "orders"
    with pytest.raises(ValueError):
        qw.request_from_kafka(api_key, body, 2)

"""Every Raft message survives the trip through Kafka's KRaft RPCs (encoded at
the version nodes send, decoded, mapped back)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.broker.control import quorum_wire as qw
from odradek.broker.handlers.k01_fetch import _metadata_log_fetch
from odradek.raft import messages as rm
from odradek.raft.log import Entry, Snapshot
from odradek.raft.voters import Endpoint, Voter, VoterSet, kraft_version_record, voters_record
from odradek.wire import api
from odradek.wire.messages import fetch_request as fq

REQUESTS: list[Any] = [
    rm.VoteRequest(2, 1, 7, 6, 120, pre_vote=True),
    rm.VoteRequest(3, 1, 8, 7, 0, pre_vote=False),
    rm.BeginEpochRequest(2, 3, 9),
    rm.EndEpochRequest(2, 1, 9, (3, 1)),
    rm.FetchRequest(3, 2, 9, 44, 8),
    rm.FetchSnapshotRequest(3, 2, 9, (40, 8)),
    rm.VoteRequest(2, 1, 7, 6, 120, pre_vote=False, voter_directory_id=uuid.UUID(int=7)),
    rm.FetchRequest(3, 2, 9, 44, 8, uuid.UUID(int=0xD1)),
    rm.UpdateVoterRequest(3, 1, 9, uuid.UUID(int=0xD3),
                          (Endpoint("CONTROLLER", "h3", 9103), Endpoint("OTHER", "h3", 9203)),
                          (0, 1)),
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
    (REQUESTS[8], rm.UpdateVoterResponse(1, 3, 9, 1)),
    (REQUESTS[8], rm.UpdateVoterResponse(1, 3, 9, 2, 6)),
    (REQUESTS[8], rm.UpdateVoterResponse(1, 3, 9, -1, 6)),
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
    answer = qw.response_to_kafka(msg, 1_700_000_000_000, qw.VERSIONS[api_key], ("h", 9093))
    decoded = _through_wire(api_key, answer, True)
    assert qw.response_from_kafka(api_key, decoded, request_msg) == msg


def test_requests_for_other_partitions_are_refused() -> None:
    api_key, body = qw.request_to_kafka(REQUESTS[4], "c")
    body.topics[0].partitions[0].partition = 1
    with pytest.raises(ValueError):
        qw.request_from_kafka(api_key, body, 2)
    by_name = qw.fetch_request(REQUESTS[4], "c", 12)  # v12: the topic by name
    assert qw.request_from_kafka(1, by_name, 2) == REQUESTS[4]
    by_name.topics[0].topic = "orders"
    with pytest.raises(ValueError):
        qw.request_from_kafka(1, by_name, 2)


def test_a_requests_topic_id_elsewhere_is_refused() -> None:
    _, body = qw.request_to_kafka(REQUESTS[7], "c")
    body.topics[0].topic_id = uuid.UUID(int=2)
    with pytest.raises(ValueError):
        qw.request_from_kafka(1, body, 2)


# -- Fetch at v17, as Kafka 4's KRaft sends it, and the earlier versions served ----------

DIRECTORY = uuid.UUID("5f1e3c2a-0b4d-4e6f-8a9b-0c1d2e3f4a5b")


def _wire(message: Any, version: int) -> Any:
    return type(message).decode(memoryview(message.encode(version)), version)


def test_the_metadata_topic_id_is_kafkas_fixed_one() -> None:
    import base64

    assert qw.METADATA_TOPIC_ID.int >> 64 == 0 and qw.METADATA_TOPIC_ID.int & (2**64 - 1) == 1
    encoded = base64.urlsafe_b64encode(qw.METADATA_TOPIC_ID.bytes).rstrip(b"=")
    assert encoded == b"AAAAAAAAAAAAAAAAAAAAAQ"


def test_raft_fetch_is_sent_at_v17_with_topic_id_replica_state_and_directory_id() -> None:
    assert qw.VERSIONS[1] == 17
    api_key, body = qw.request_to_kafka(rm.FetchRequest(3, 2, 9, 44, 8, DIRECTORY), "cid")
    assert api_key == 1
    req = _wire(body, 17)
    assert req.cluster_id == "cid"
    assert req.replica_id == -1  # not in v15+: the replica is in ReplicaState
    assert (req.replica_state.replica_id, req.replica_state.replica_epoch) == (3, -1)
    [topic] = req.topics
    assert topic.topic_id == qw.METADATA_TOPIC_ID
    assert topic.topic == ""  # names are gone from v13
    [part] = topic.partitions
    assert (part.partition, part.current_leader_epoch, part.fetch_offset,
            part.last_fetched_epoch) == (0, 9, 44, 8)
    assert part.replica_directory_id == DIRECTORY
    # The directory id travels as tag 0 of the partition: its 16 bytes are on the wire.
    assert DIRECTORY.bytes in bytes(body.encode(17))
    core = qw.request_from_kafka(1, req, 2)
    assert core == rm.FetchRequest(3, 2, 9, 44, 8, DIRECTORY)


def test_a_v12_raft_fetch_by_name_is_still_understood() -> None:
    # As an Odradek of the previous release sends it: ReplicaId, the topic by name.
    body = fq.FetchRequest("cid", replica_id=3, max_wait_ms=0, min_bytes=0, topics=[
        fq.FetchTopic("__cluster_metadata", partitions=[fq.FetchPartition(
            0, 9, 44, 8, partition_max_bytes=1 << 20)])])
    req = _wire(body, 12)
    assert qw.request_from_kafka(1, req, 2) == rm.FetchRequest(3, 2, 9, 44, 8)
    assert qw.request_from_kafka(1, req, 2).directory_id == uuid.UUID(int=0)


@pytest.mark.parametrize("version", [12, 13, 15, 16, 17])
def test_raft_fetch_round_trips_at_every_served_version(version: int) -> None:
    msg = rm.FetchRequest(3, 2, 9, 44, 8, DIRECTORY)
    req = _wire(qw.fetch_request(msg, "cid", version), version)
    want = msg if version >= 17 else rm.FetchRequest(3, 2, 9, 44, 8)  # no directory below
    assert qw.request_from_kafka(1, req, 2) == want
    assert (req.topics[0].topic_id == qw.METADATA_TOPIC_ID) == (version >= 13)
    assert (req.replica_state.replica_id == 3) == (version >= 15)


def test_a_v17_fetch_answer_names_the_topic_by_id_and_the_leaders_endpoint() -> None:
    request = rm.FetchRequest(3, 2, 9, 44, 8, DIRECTORY)
    msg = rm.FetchResponse(2, 3, 9, 1, 44, 30, diverging=(8, 40))
    resp = _wire(qw.response_to_kafka(msg, 0, 17, ("ctl-1", 9093)), 17)
    [topic] = resp.responses
    assert topic.topic_id == qw.METADATA_TOPIC_ID and topic.topic == ""
    [part] = topic.partitions
    assert part.high_watermark == 30
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 9)
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (8, 40)
    assert [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints] == [
        (1, "ctl-1", 9093, None)]
    assert qw.node_endpoints(resp) == {1: ("ctl-1", 9093)}
    assert qw.response_from_kafka(1, resp, request) == msg


def test_a_snapshot_id_answer_at_v17() -> None:
    request = rm.FetchRequest(3, 2, 9, 4, 1)
    msg = rm.FetchResponse(2, 3, 9, 2, 4, 50, snapshot_id=(40, 8))
    resp = _wire(qw.response_to_kafka(msg, 0, 17, None), 17)
    part = resp.responses[0].partitions[0]
    assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (40, 8)
    assert resp.node_endpoints == []  # no endpoint known, none sent
    assert qw.response_from_kafka(1, resp, request) == msg


def test_a_v12_fetch_answer_names_the_topic_and_carries_no_endpoints() -> None:
    request = rm.FetchRequest(3, 2, 9, 44, 8)
    msg = rm.FetchResponse(2, 3, 9, 1, 44, 30)
    resp = _wire(qw.response_to_kafka(msg, 0, 12, ("ctl-1", 9093)), 12)
    assert resp.responses[0].topic == "__cluster_metadata"
    assert resp.node_endpoints == [] and qw.node_endpoints(resp) == {}
    assert qw.response_from_kafka(1, resp, request) == msg


def test_an_error_answer_without_a_leader_carries_no_endpoint() -> None:
    msg = rm.FetchResponse(2, 3, 10, -1, 44, error=6)
    resp = _wire(qw.response_to_kafka(msg, 0, 17, ("ctl-1", 9093)), 17)
    assert resp.node_endpoints == []
    assert resp.responses[0].partitions[0].error_code == 6


@pytest.mark.parametrize("version,topic,expect", [
    (17, fq.FetchTopic(topic_id=qw.METADATA_TOPIC_ID), True),
    (13, fq.FetchTopic(topic_id=qw.METADATA_TOPIC_ID), True),
    (12, fq.FetchTopic("__cluster_metadata"), True),
    (12, fq.FetchTopic("orders"), False),
    (17, fq.FetchTopic(topic_id=uuid.UUID(int=99)), False),
    (17, fq.FetchTopic("__cluster_metadata"), False),  # a name is not on the wire at v17
])
def test_the_fetch_handler_routes_the_metadata_log_by_the_versions_field(
        version: int, topic: Any, expect: bool) -> None:
    assert _metadata_log_fetch(fq.FetchRequest(topics=[topic]), version) is expect


def test_an_update_voter_answer_names_the_leader_and_its_endpoint() -> None:
    answer = qw.response_to_kafka(rm.UpdateVoterResponse(1, 3, 9, 2, 6), 0, 0, ("h2", 9102))
    assert (answer.error_code, answer.current_leader.leader_id,
            answer.current_leader.leader_epoch, answer.current_leader.host,
            answer.current_leader.port) == (6, 2, 9, "h2", 9102)
    unknown = qw.response_to_kafka(rm.UpdateVoterResponse(1, 3, 9, -1, 6), 0, 0, None)
    assert (unknown.current_leader.leader_id, unknown.current_leader.host) == (-1, "")


def test_begin_quorum_epoch_v1_announces_the_leaders_endpoints() -> None:
    own = (Endpoint("CONTROLLER", "h2", 9102), Endpoint("OTHER", "h2", 9202))
    api_key, body = qw.request_to_kafka(rm.BeginEpochRequest(2, 3, 9), "c", own)
    assert (api_key, qw.VERSIONS[api_key]) == (53, 1)
    decoded = _through_wire(api_key, body, response=False)
    assert qw.request_from_kafka(api_key, decoded, 3) == rm.BeginEpochRequest(2, 3, 9)
    assert qw.announced_endpoint(decoded, "CONTROLLER") == (2, 9, ("h2", 9102))
    assert qw.announced_endpoint(decoded, "OTHER") == (2, 9, ("h2", 9202))
    _, bare = qw.request_to_kafka(rm.BeginEpochRequest(2, 3, 9), "c")
    assert qw.announced_endpoint(_through_wire(53, bare, response=False), "CONTROLLER") is None


def test_a_fetch_answer_hints_the_leader_it_names_with_its_endpoint() -> None:
    request = rm.FetchRequest(3, 2, 9, 44, 8)
    error = qw.response_to_kafka(rm.FetchResponse(2, 3, 10, 1, 44, error=6), 0, 17, ("h1", 9101))
    decoded = _through_wire(1, error, True)
    assert qw.leader_hint(decoded) == (1, 10, ("h1", 9101))
    unknown = qw.response_to_kafka(rm.FetchResponse(2, 3, 10, -1, 44, error=6), 0, 17, None)
    assert qw.leader_hint(_through_wire(1, unknown, True)) is None
    assert qw.response_from_kafka(1, decoded, request).leader_id == 1


def test_a_leader_encodes_an_entry_once_for_its_followers() -> None:
    """The second follower asking for the same entries gets the bytes encoded
    for the first (its batches carry the first send's time), which decode to
    the same entries; an equal entry of another quorum gets the same bytes, a
    different one its own; the cache lets the oldest go past its bound."""
    from odradek.raft import codec

    encoded = qw.EncodedEntries(max_bytes=400)
    first = encoded(ENTRIES, 1_000)
    assert encoded(ENTRIES, 2_000) == first == codec.encode_entries(ENTRIES, 1_000)
    assert tuple(codec.decode_entries(first)) == ENTRIES
    again = Entry(47, 9, (b"a", b"bc"))  # equal, another object
    assert encoded([again], 3_000) == codec.encode_entry(ENTRIES[1], 1_000)
    other = Entry(47, 9, (b"a", b"bd"))  # another quorum's entry at that offset and epoch
    assert tuple(codec.decode_entries(encoded([other], 3_000))) == (other,)
    for i in range(20):
        encoded([Entry(100 + i, 9, (bytes(40),))], 4_000)
    assert encoded._bytes <= 400 and ENTRIES[0] not in encoded._batches

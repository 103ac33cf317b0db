"""Every served version of the group APIs, over a real socket, and the
``__consumer_offsets`` topic they live in."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.delete_groups_request import DeleteGroupsRequest
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.heartbeat_request import HeartbeatRequest
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.wire.messages.list_groups_request import ListGroupsRequest
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.wire.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from odradek.wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from odradek.wire.records import Record, build_batch
from tests.support.rawclient import RawClient

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "2"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**SETTINGS) as b:
        yield b


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawClient]:
    client = RawClient(broker.bootstrap_servers)
    yield client
    client.close()


def _ensure_topic(raw: RawClient, name: str) -> None:
    raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                allow_auto_topic_creation=True), 9)


def test_consumer_offsets_is_created_by_the_coordinator_with_50_partitions(
    raw: RawClient,
) -> None:
    resp = raw.request(
        MetadataRequest(topics=[MetadataRequestTopic(name="__consumer_offsets")]), 9
    )
    (topic,) = resp.topics
    assert topic.error_code == 0 and topic.is_internal
    assert len(topic.partitions) == 50  # offsets.topic.num.partitions, not num.partitions


def test_clients_cannot_produce_to_consumer_offsets(raw: RawClient) -> None:
    _ensure_topic(raw, "__consumer_offsets")
    batch = build_batch([Record(0, 0, b"k", b"v")])
    resp = raw.request(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="__consumer_offsets",
                         partition_data=[PartitionProduceData(index=0, records=batch)])
    ]), 9)
    assert resp.responses[0].partition_responses[0].error_code == (
        ErrorCode.INVALID_TOPIC_EXCEPTION
    )


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator_every_version(raw: RawClient, broker: Broker, version: int) -> None:
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    if version >= 4:
        resp = raw.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(c.key, c.error_code, c.port) for c in resp.coordinators] == [
            ("a", 0, port), ("b", 0, port)
        ]
        txn = raw.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["t", ""]), 4)
        assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [
            ("t", 0, port), ("", ErrorCode.INVALID_REQUEST, -1)
        ]
    else:
        resp = raw.request(FindCoordinatorRequest(key="g", key_type=0), version)
        assert (resp.error_code, resp.node_id, resp.port) == (0, 1, port)


def _join(raw: RawClient, group: str, version: int, member_id: str = "") -> object:
    return raw.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id=member_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"meta")],
    ), version)


@pytest.mark.parametrize(("join_v", "sync_v", "hb_v", "leave_v"), [
    (0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3), (4, 3, 3, 3),
    (5, 4, 4, 4), (6, 4, 4, 4), (7, 5, 4, 4),
])
def test_membership_round_trip_every_version(
    raw: RawClient, join_v: int, sync_v: int, hb_v: int, leave_v: int
) -> None:
    group = f"round-trip-{join_v}"
    joined = _join(raw, group, join_v)
    if join_v >= 4:  # KIP-394: the first JoinGroup only hands out a member id
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED and joined.member_id
        joined = _join(raw, group, join_v, joined.member_id)
    assert joined.error_code == 0 and joined.generation_id == 1
    assert joined.leader == joined.member_id and joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"meta")]
    me = joined.member_id
    synced = raw.request(SyncGroupRequest(
        group_id=group, generation_id=1, member_id=me, protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=me, assignment=b"mine")],
    ), sync_v)
    assert (synced.error_code, synced.assignment) == (0, b"mine")
    beat = raw.request(HeartbeatRequest(group_id=group, generation_id=1, member_id=me), hb_v)
    assert beat.error_code == 0
    stale = raw.request(HeartbeatRequest(group_id=group, generation_id=0, member_id=me), hb_v)
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    if leave_v >= 3:
        left = raw.request(LeaveGroupRequest(
            group_id=group, members=[MemberIdentity(member_id=me)]
        ), leave_v)
        assert [m.error_code for m in left.members] == [0]
    else:
        left = raw.request(LeaveGroupRequest(group_id=group, member_id=me), leave_v)
    assert left.error_code == 0
    gone = raw.request(HeartbeatRequest(group_id=group, generation_id=1, member_id=me), hb_v)
    assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def _commit(raw: RawClient, group: str, version: int, offset: int) -> object:
    return raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequestTopic(name="offsets-t", partitions=[
            OffsetCommitRequestPartition(partition_index=p, committed_offset=offset + p,
                                         committed_leader_epoch=0, committed_metadata="md")
            for p in (0, 1)
        ])],
    ), version)


def _fetch(raw: RawClient, group: str, version: int) -> dict[int, tuple[int, str]]:
    if version >= 8:
        resp = raw.request(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id=group,
            topics=[OffsetFetchRequestTopics(name="offsets-t", partition_indexes=[0, 1, 5])],
        )]), version)
        (g,) = resp.groups
        assert g.error_code == 0
        parts = g.topics[0].partitions
    else:
        resp = raw.request(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic(name="offsets-t", partition_indexes=[0, 1, 5])
        ]), version)
        parts = resp.topics[0].partitions
    assert all(p.error_code == 0 for p in parts)
    return {p.partition_index: (p.committed_offset, p.metadata) for p in parts}


@pytest.mark.parametrize("version", range(2, 9))
def test_offset_commit_and_fetch_every_version(raw: RawClient, version: int) -> None:
    _ensure_topic(raw, "offsets-t")
    group = f"offsets-{version}"
    resp = _commit(raw, group, version, 10 * version)
    assert [p.error_code for p in resp.topics[0].partitions] == [0, 0]
    fetch_version = version if version > 2 else 1
    assert _fetch(raw, group, fetch_version) == {
        0: (10 * version, "md"), 1: (10 * version + 1, "md"), 5: (-1, "")
    }


def test_offset_fetch_v8_many_groups_and_all_partitions(raw: RawClient) -> None:
    _ensure_topic(raw, "offsets-t")
    _commit(raw, "many-a", 8, 100)
    resp = raw.request(OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id="many-a", topics=None),
        OffsetFetchRequestGroup(group_id="many-unknown", topics=None),
    ]), 8)
    a, unknown = resp.groups
    assert [(p.partition_index, p.committed_offset) for p in a.topics[0].partitions] == [
        (0, 100), (1, 101)
    ]
    assert unknown.error_code == 0 and unknown.topics == []


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_every_version(raw: RawClient, version: int) -> None:
    group = f"describe-{version}"
    joined = _join(raw, group, 3)
    raw.request(SyncGroupRequest(group_id=group, generation_id=1, member_id=joined.member_id,
                                 assignments=[SyncGroupRequestAssignment(
                                     member_id=joined.member_id, assignment=b"a")]), 3)
    resp = raw.request(DescribeGroupsRequest(groups=[group, "describe-none"]), version)
    described, none = resp.groups
    assert (described.error_code, described.group_state, described.protocol_data) == (
        0, "Stable", "range"
    )
    (member,) = described.members
    assert (member.member_id, member.member_metadata, member.member_assignment) == (
        joined.member_id, b"meta", b"a"
    )
    assert member.client_host.startswith("/127.0.0.1")
    assert none.group_state == "Dead" and none.members == []


@pytest.mark.parametrize("version", range(5))
def test_list_groups_every_version(raw: RawClient, version: int) -> None:
    _ensure_topic(raw, "offsets-t")
    _commit(raw, f"listed-{version}", 8, 1)
    resp = raw.request(ListGroupsRequest(), version)
    assert resp.error_code == 0
    assert f"listed-{version}" in {g.group_id for g in resp.groups}
    if version >= 4:
        only_stable = raw.request(ListGroupsRequest(states_filter=["stable"]), version)
        assert all(g.group_state == "Stable" for g in only_stable.groups)
        assert f"listed-{version}" not in {g.group_id for g in only_stable.groups}


@pytest.mark.parametrize("version", range(3))
def test_delete_groups_every_version(raw: RawClient, version: int) -> None:
    _ensure_topic(raw, "offsets-t")
    empty, busy = f"del-empty-{version}", f"del-busy-{version}"
    _commit(raw, empty, 8, 5)
    _join(raw, busy, 3)
    resp = raw.request(DeleteGroupsRequest(groups_names=[empty, busy, "del-none"]), version)
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        (empty, 0), (busy, ErrorCode.NON_EMPTY_GROUP), ("del-none", ErrorCode.GROUP_ID_NOT_FOUND)
    ]
    assert _fetch(raw, empty, 8) == {0: (-1, ""), 1: (-1, ""), 5: (-1, "")}


def test_offset_delete(raw: RawClient) -> None:
    _ensure_topic(raw, "offsets-t")
    _commit(raw, "od", 8, 7)
    resp = raw.request(OffsetDeleteRequest(group_id="od", topics=[OffsetDeleteRequestTopic(
        name="offsets-t", partitions=[OffsetDeleteRequestPartition(partition_index=0)]
    )]), 0)
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
    assert _fetch(raw, "od", 8) == {0: (-1, ""), 1: (8, "md"), 5: (-1, "")}
    unknown = raw.request(OffsetDeleteRequest(group_id="od-none", topics=[]), 0)
    assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_committed_offsets_and_groups_survive_a_restart() -> None:
    with tempfile.TemporaryDirectory() as data:
        with Broker(data_dir=data, **SETTINGS) as b:
            client = RawClient(b.bootstrap_servers)
            _ensure_topic(client, "offsets-t")
            _commit(client, "durable", 8, 40)
            joined = _join(client, "stable-group", 3)
            client.request(SyncGroupRequest(
                group_id="stable-group", generation_id=1, member_id=joined.member_id,
                assignments=[SyncGroupRequestAssignment(member_id=joined.member_id,
                                                        assignment=b"a")],
            ), 3)
            client.close()
        with Broker(data_dir=data, **SETTINGS) as b:
            client = RawClient(b.bootstrap_servers)
            deadline = time.monotonic() + 10
            while True:  # the coordinator loads in the background: retry while it says so
                resp = client.request(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
                    group_id="durable", topics=None)]), 8)
                if resp.groups[0].error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                assert time.monotonic() < deadline, "the coordinator never finished loading"
            parts = resp.groups[0].topics[0].partitions
            assert [(p.partition_index, p.committed_offset, p.metadata) for p in parts] == [
                (0, 40, "md"), (1, 41, "md")
            ]
            described = client.request(DescribeGroupsRequest(groups=["stable-group"]), 5)
            group = described.groups[0]
            assert group.group_state == "Stable"
            assert [m.member_id for m in group.members] == [joined.member_id]
            beat = client.request(HeartbeatRequest(
                group_id="stable-group", generation_id=1, member_id=joined.member_id
            ), 3)
            assert beat.error_code == 0
            client.close()


def test_deleting_a_topic_deletes_its_committed_offsets(raw: RawClient) -> None:
    from odradek.wire.messages.delete_topics_request import DeleteTopicsRequest

    _ensure_topic(raw, "offsets-t")
    _commit(raw, "topic-gone", 8, 3)
    assert _fetch(raw, "topic-gone", 8)[0] == (3, "md")
    resp = raw.request(DeleteTopicsRequest(topic_names=["offsets-t"], timeout_ms=1000), 4)
    assert resp.responses[0].error_code == 0
    assert _fetch(raw, "topic-gone", 8) == {0: (-1, ""), 1: (-1, ""), 5: (-1, "")}


def test_offsets_expire_after_the_retention_check() -> None:
    settings = {**SETTINGS, "offsets.retention.minutes": "0",
                "offsets.retention.check.interval.ms": "50"}
    with Broker(**settings) as b:
        client = RawClient(b.bootstrap_servers)
        _ensure_topic(client, "offsets-t")
        _commit(client, "expiring", 8, 9)
        deadline = time.monotonic() + 10
        while _fetch(client, "expiring", 8)[0] != (-1, ""):
            assert time.monotonic() < deadline, "the offsets never expired"
            time.sleep(0.02)
        listed = client.request(ListGroupsRequest(), 4)
        assert "expiring" not in {g.group_id for g in listed.groups}
        client.close()

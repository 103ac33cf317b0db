"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and the v9 offset APIs at the
protocol level, over a real socket: the epochs and steps of KIP-848's
reconciliation, Kafka's errors for bad and stale requests, and the broker
serving on after malformed frames."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.wire.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from odradek.wire.messages.delete_groups_request import DeleteGroupsRequest
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.list_groups_request import ListGroupsRequest
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.integration.groupclients import wait_until
from tests.integration.test_bad_input import _frame
from tests.support.rawclient import RawClient

TOPIC = "raw848"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(**{"group.consumer.session.timeout.ms": "1500",
                   "group.consumer.heartbeat.interval.ms": "250"}) as b:
        b.create_topic(TOPIC, partitions=4)
        yield b


@pytest.fixture
def raw(broker: Broker) -> Iterator[RawClient]:
    c = RawClient(broker.bootstrap_servers)
    try:
        yield c
    finally:
        c.close()


def _topic_id(raw: RawClient) -> uuid.UUID:
    resp = raw.request(MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), 12)
    tid: uuid.UUID = resp.topics[0].topic_id
    return tid


def _hb(raw: RawClient, group: str, member: str, epoch: int, version: int = 1,
        owned: list[int] | None = None, tid: uuid.UUID | None = None, **kw: Any) -> Any:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 5000)
        kw.setdefault("subscribed_topic_names", [TOPIC])
        owned = owned if owned is not None else []
    parts = None if owned is None else (
        [TopicPartitions(topic_id=tid, partitions=owned)] if owned and tid else [])
    return raw.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, topic_partitions=parts, **kw),
        version)


def _parts(resp: Any) -> list[int]:
    assert resp.assignment is not None
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


def test_a_member_joins_heartbeats_and_is_fenced_on_a_wrong_epoch(raw: RawClient) -> None:
    joined = _hb(raw, "g1", "m-a", 0)
    assert joined.error_code == 0 and joined.member_id == "m-a"
    assert joined.member_epoch >= 1 and joined.heartbeat_interval_ms == 250
    assert _parts(joined) == [0, 1, 2, 3]
    again = _hb(raw, "g1", "m-a", joined.member_epoch)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, joined.member_epoch,
                                                                        None)
    ahead = _hb(raw, "g1", "m-a", joined.member_epoch + 1)
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    stranger = _hb(raw, "g1", "m-nobody", 3)
    assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # The coordinator's id for a v0 member that joins without one.
    v0 = _hb(raw, "g0", "", 0, version=0)
    assert v0.error_code == 0 and v0.member_id


def test_partitions_move_only_after_their_owner_revokes_them(raw: RawClient) -> None:
    tid = _topic_id(raw)
    a = _hb(raw, "g2", "m-a", 0)
    assert _parts(a) == [0, 1, 2, 3]
    a_epoch = a.member_epoch
    b = _hb(raw, "g2", "m-b", 0)
    assert b.error_code == 0 and _parts(b) == []  # still held by m-a
    # m-a hears it must give two up: it keeps its epoch until it has.
    a = _hb(raw, "g2", "m-a", a_epoch, owned=[0, 1, 2, 3], tid=tid)
    keep = _parts(a)
    assert len(keep) == 2 and a.member_epoch == a_epoch
    described = raw.request(ConsumerGroupDescribeRequest(group_ids=["g2"]), 0).groups[0]
    assert described.group_state == "Reconciling"
    # Revoked: m-a moves to the new epoch, m-b gets the two released partitions.
    a = _hb(raw, "g2", "m-a", a_epoch, owned=keep, tid=tid)
    assert a.error_code == 0 and a.member_epoch > a_epoch
    b = _hb(raw, "g2", "m-b", b.member_epoch, owned=[], tid=tid)
    assert _parts(b) == sorted({0, 1, 2, 3} - set(keep))
    b = _hb(raw, "g2", "m-b", b.member_epoch, owned=_parts(b), tid=tid)
    described = raw.request(ConsumerGroupDescribeRequest(group_ids=["g2"]), 0).groups[0]
    assert described.error_code == 0 and described.group_state == "Stable"
    assert {m.member_id: m.member_epoch for m in described.members} == {
        "m-a": described.assignment_epoch, "m-b": described.assignment_epoch}
    assert {m.assignment.topic_partitions[0].topic_name for m in described.members} == {TOPIC}


def test_a_member_that_stops_heartbeating_is_removed(raw: RawClient) -> None:
    tid = _topic_id(raw)
    a = _hb(raw, "g3", "m-a", 0)
    b = _hb(raw, "g3", "m-b", 0)
    a = _hb(raw, "g3", "m-a", a.member_epoch, owned=[0, 1, 2, 3], tid=tid)
    keep = _parts(a)
    a = _hb(raw, "g3", "m-a", a.member_epoch, owned=keep, tid=tid)
    # m-b goes silent; m-a keeps heartbeating until it has every partition.
    state: dict[str, Any] = {"epoch": a.member_epoch, "owned": keep}

    def a_has_all() -> bool:
        r = _hb(raw, "g3", "m-a", state["epoch"], owned=state["owned"], tid=tid)
        assert r.error_code == 0, r
        state["epoch"] = r.member_epoch
        if r.assignment is not None:
            state["owned"] = _parts(r)
        return state["owned"] == [0, 1, 2, 3]

    wait_until(a_has_all, 15, "m-b's session to expire and m-a to get everything")
    assert _hb(raw, "g3", "m-b", b.member_epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_comes_back_under_a_new_member_id(raw: RawClient) -> None:
    first = _hb(raw, "g4", "m-1", 0, instance_id="inst")
    assert first.error_code == 0
    clash = _hb(raw, "g4", "m-2", 0, instance_id="inst")
    assert clash.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    left = _hb(raw, "g4", "m-1", -2, instance_id="inst")
    assert (left.error_code, left.member_epoch) == (0, -2)
    back = _hb(raw, "g4", "m-2", 0, instance_id="inst")
    assert back.error_code == 0
    assert back.member_epoch == first.member_epoch and _parts(back) == _parts(first)
    described = raw.request(ConsumerGroupDescribeRequest(group_ids=["g4"]), 0).groups[0]
    assert [(m.member_id, m.instance_id) for m in described.members] == [("m-2", "inst")]


@pytest.mark.parametrize(("case", "kw", "code"), [
    ("empty member id (v1)", {"member": ""}, ErrorCode.INVALID_REQUEST),
    ("no rebalance timeout", {"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
    ("no subscription", {"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST),
    ("owned partitions when joining", {"owned_first": True}, ErrorCode.INVALID_REQUEST),
    ("unknown assignor", {"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
    ("RE2 has no lookahead", {"subscribed_topic_regex": "(?=x)"},
     ErrorCode.INVALID_REGULAR_EXPRESSION),
    ("epoch below -2", {"epoch": -3}, ErrorCode.INVALID_REQUEST),
    ("empty group id", {"group": ""}, ErrorCode.INVALID_REQUEST),
])
def test_bad_heartbeats_get_kafkas_errors(
    raw: RawClient, case: str, kw: dict[str, Any], code: int
) -> None:
    member = kw.pop("member", "m-x")
    epoch = kw.pop("epoch", 0)
    group = kw.pop("group", "g-bad")
    if kw.pop("owned_first", False):
        kw["topic_partitions"] = [TopicPartitions(topic_id=_topic_id(raw), partitions=[0])]
    req = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch,
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 5000),
        subscribed_topic_names=kw.pop("subscribed_topic_names", [TOPIC]),
        topic_partitions=kw.pop("topic_partitions", []), **kw)
    resp = raw.request(req, 1)
    assert resp.error_code == code, case
    assert resp.error_message


def _commit(raw: RawClient, group: str, member: str, epoch: int, version: int) -> int:
    resp = raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
        topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])]), version)
    code: int = resp.topics[0].partitions[0].error_code
    return code


def test_offsets_of_a_consumer_group_check_the_member_epoch(raw: RawClient) -> None:
    joined = _hb(raw, "g5", "m-a", 0)
    epoch = joined.member_epoch
    assert _commit(raw, "g5", "m-a", epoch - 1, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert _commit(raw, "g5", "m-nobody", epoch, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(raw, "g5", "m-a", epoch, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert _commit(raw, "g5", "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # it has members
    assert _commit(raw, "g5", "m-a", epoch, 9) == 0

    def fetch(member: str | None, member_epoch: int) -> Any:
        return raw.request(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id="g5", member_id=member, member_epoch=member_epoch,
            topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])]),
            9).groups[0]

    assert fetch("m-a", epoch - 1).error_code == ErrorCode.STALE_MEMBER_EPOCH
    ok = fetch("m-a", epoch)
    assert ok.error_code == 0 and ok.topics[0].partitions[0].committed_offset == 7
    admin = fetch(None, -1)
    assert admin.error_code == 0 and admin.topics[0].partitions[0].committed_offset == 7


def test_group_administration_sees_both_kinds(raw: RawClient) -> None:
    _hb(raw, "g-new", "m-a", 0)
    classic = raw.request(JoinGroupRequest(
        group_id="g-old", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id="", protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
    assert classic.error_code == 0
    listed = raw.request(ListGroupsRequest(), 5).groups
    assert sorted((g.group_id, g.group_type, g.group_state) for g in listed) == [
        ("g-new", "consumer", "Stable"), ("g-old", "classic", "CompletingRebalance")]
    only = raw.request(ListGroupsRequest(types_filter=["Classic"]), 5).groups
    assert [g.group_id for g in only] == ["g-old"]
    # Each protocol's describe refuses the other kind; heartbeats and joins too.
    described = raw.request(DescribeGroupsRequest(groups=["g-new"]), 5).groups[0]
    assert (described.error_code, described.group_state, described.protocol_type) == (
        0, "Dead", "")  # before v6 Kafka 4.0 shows a consumer group as Dead
    described = raw.request(DescribeGroupsRequest(groups=["g-new", "g-none"]), 6).groups
    assert [(g.error_code, g.error_message) for g in described] == [
        (ErrorCode.GROUP_ID_NOT_FOUND, "Group g-new is not a classic group."),
        (ErrorCode.GROUP_ID_NOT_FOUND, "Group g-none not found.")]
    assert raw.request(ConsumerGroupDescribeRequest(group_ids=["g-new"]), 1).groups[
        0].members[0].member_type == 1
    other = raw.request(ConsumerGroupDescribeRequest(group_ids=["g-old", "g-none"]), 0).groups
    assert [g.error_code for g in other] == [ErrorCode.GROUP_ID_NOT_FOUND] * 2
    assert _hb(raw, "g-old", "m-b", 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    join = raw.request(JoinGroupRequest(
        group_id="g-new", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id="", protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
    assert join.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # A consumer group is deleted only once empty.
    deleted = raw.request(DeleteGroupsRequest(groups_names=["g-new"]), 2).results[0]
    assert deleted.error_code == ErrorCode.NON_EMPTY_GROUP
    assert _hb(raw, "g-new", "m-a", -1).error_code == 0
    deleted = raw.request(DeleteGroupsRequest(groups_names=["g-new"]), 2).results[0]
    assert deleted.error_code == 0
    assert [g.group_id for g in raw.request(ListGroupsRequest(), 5).groups] == ["g-old"]


def _heartbeat_frame(body: bytes) -> bytes:
    return _frame(68, 1, 7, body, flexible=True)


@pytest.mark.parametrize("frame", [
    _heartbeat_frame(b"\x04grp"),  # cut short after the group id
    _heartbeat_frame(b"\x02g\x02m" + struct.pack(">i", 0) + b"\x00\x00"
                     + struct.pack(">i", 5000) + b"\xff\xff\xff\xff\x0f"),  # array lies
], ids=["truncated", "array-length-lies"])
def test_malformed_heartbeats_close_the_connection(broker: Broker, frame: bytes) -> None:
    bad = RawClient(broker.bootstrap_servers, timeout_s=5)
    try:
        bad.send_raw(frame)
        assert bad.is_closed_by_peer()
    finally:
        bad.close()
    good = RawClient(broker.bootstrap_servers)
    try:
        assert _hb(good, "g-after", "m-a", 0).error_code == 0
    finally:
        good.close()


def _subscription(topics: list[str]) -> bytes:
    from odradek.wire.messages.consumer_protocol_subscription import (
        ConsumerProtocolSubscription,
    )
    return struct.pack(">h", 0) + ConsumerProtocolSubscription(topics=topics).encode(0)


def _assigned(data: bytes) -> list[int]:
    from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
    a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], 0)
    return sorted(p for tp in a.assigned_partitions for p in tp.partitions)


def test_classic_members_are_served_by_an_upgraded_group(raw: RawClient) -> None:
    from odradek.wire.messages.heartbeat_request import HeartbeatRequest
    from odradek.wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
    from odradek.wire.messages.sync_group_request import (
        SyncGroupRequest,
        SyncGroupRequestAssignment,
    )

    def join(member_id: str) -> Any:
        return raw.request(JoinGroupRequest(
            group_id="g-up", session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id=member_id, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range",
                                                metadata=_subscription([TOPIC]))]), 5)

    first = join("")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(first.member_id)
    mid, gen = joined.member_id, joined.generation_id
    from odradek.coordinator.consumer.classic_members import encode_assignment
    tid = _topic_id(raw)
    everything = encode_assignment({tid: frozenset(range(4))}, {tid: TOPIC}.get, 0)
    synced = raw.request(SyncGroupRequest(group_id="g-up", generation_id=gen, member_id=mid,
                                          assignments=[SyncGroupRequestAssignment(
                                              member_id=mid, assignment=everything)]), 3)
    assert synced.error_code == 0
    # A consumer-protocol member arrives: the group is upgraded online.
    newcomer = _hb(raw, "g-up", "m-new", 0)
    assert newcomer.error_code == 0 and _parts(newcomer) == []
    described = raw.request(ConsumerGroupDescribeRequest(group_ids=["g-up"]), 1).groups[0]
    assert sorted((m.member_id, m.member_type) for m in described.members) == [
        ("m-new", 1), (mid, 0)]
    # The classic member is told to rejoin; its JoinGroup answers at once with
    # its member epoch as the generation, and SyncGroup gives its share.
    beat = raw.request(HeartbeatRequest(group_id="g-up", generation_id=gen, member_id=mid), 3)
    assert beat.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = join(mid)
    assert rejoined.error_code == 0 and rejoined.members == []
    gen = rejoined.generation_id
    share = raw.request(SyncGroupRequest(group_id="g-up", generation_id=gen, member_id=mid),
                        3)
    assert share.error_code == 0 and len(_assigned(share.assignment)) == 2
    stale = raw.request(SyncGroupRequest(group_id="g-up", generation_id=gen - 1,
                                         member_id=mid), 3)
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    assert _commit(raw, "g-up", mid, gen, 8) == 0  # a classic member commits at its epoch
    assert _commit(raw, "g-up", mid, gen + 5, 8) == ErrorCode.ILLEGAL_GENERATION
    # The newcomer gets the two partitions the classic member released.
    newcomer = _hb(raw, "g-up", "m-new", newcomer.member_epoch, owned=[], tid=tid)
    assert sorted(_parts(newcomer)) == sorted(set(range(4)) - set(_assigned(share.assignment)))
    left = raw.request(LeaveGroupRequest(group_id="g-up", members=[
        MemberIdentity(member_id=mid)]), 3)
    assert left.error_code == 0 and left.members[0].error_code == 0
    described = raw.request(ConsumerGroupDescribeRequest(group_ids=["g-up"]), 1).groups[0]
    assert [m.member_id for m in described.members] == ["m-new"]


def test_a_consumer_group_left_with_classic_members_is_downgraded_online(
        raw: RawClient) -> None:
    """KIP-848's online downgrade: the last consumer-protocol member leaves, the
    classic members that remain rejoin a classic group, which a classic
    rebalance then serves (its leader assigns)."""
    from odradek.wire.messages.heartbeat_request import HeartbeatRequest
    from odradek.wire.messages.sync_group_request import (
        SyncGroupRequest,
        SyncGroupRequestAssignment,
    )

    group = "g-down"

    def join(member_id: str) -> Any:
        return raw.request(JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id=member_id, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range",
                                                metadata=_subscription([TOPIC]))]), 5)

    modern = _hb(raw, group, "m-modern", 0)
    assert modern.error_code == 0
    first = join("")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(first.member_id)  # a classic member inside the consumer group
    mid = joined.member_id
    assert joined.error_code == 0
    kinds = raw.request(ListGroupsRequest(), 5).groups
    assert [(g.group_id, g.group_type) for g in kinds if g.group_id == group] == [
        (group, "consumer")]
    # The consumer-protocol member leaves: only the classic member is left.
    gone = _hb(raw, group, "m-modern", -1)
    assert gone.error_code == 0
    kinds = raw.request(ListGroupsRequest(), 5).groups
    assert [(g.group_id, g.group_type) for g in kinds if g.group_id == group] == [
        (group, "classic")]
    described = raw.request(DescribeGroupsRequest(groups=[group]), 5).groups[0]
    assert described.protocol_type == "consumer"
    assert [m.member_id for m in described.members] == [mid]
    # A rebalance is under way: the member rejoins the classic group and, as its
    # leader, assigns every partition.
    beat = raw.request(HeartbeatRequest(group_id=group, generation_id=joined.generation_id,
                                        member_id=mid), 3)
    assert beat.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)
    rejoined = join(mid)
    assert rejoined.error_code == 0 and rejoined.leader == mid
    assert [m.member_id for m in rejoined.members] == [mid]
    from odradek.coordinator.consumer.classic_members import encode_assignment
    tid = _topic_id(raw)
    everything = encode_assignment({tid: frozenset(range(4))}, {tid: TOPIC}.get, 0)
    synced = raw.request(SyncGroupRequest(
        group_id=group, generation_id=rejoined.generation_id, member_id=mid,
        assignments=[SyncGroupRequestAssignment(member_id=mid, assignment=everything)]), 3)
    assert synced.error_code == 0 and _assigned(synced.assignment) == [0, 1, 2, 3]
    described = raw.request(DescribeGroupsRequest(groups=[group]), 5).groups[0]
    assert described.group_state == "Stable" and described.protocol_data == "range"

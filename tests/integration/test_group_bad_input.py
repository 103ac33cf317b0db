"""Hostile group requests over a real socket: an error code or a closed
connection, the broker keeps serving, committed offsets stay intact."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)
from odradek.wire.messages.sync_group_request import SyncGroupRequest
from tests.integration.test_bad_input import _frame
from tests.support.rawclient import RawClient


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**{"socket.request.max.bytes": str(8 << 20)}) as b:
        b.create_topic("bad-t", 1)
        client = RawClient(b.bootstrap_servers)
        resp = client.request(_commit("bad-g", 42), 8)
        assert resp.topics[0].partitions[0].error_code == 0
        client.close()
        yield b


def _commit(group: str, offset: int, metadata: str = "") -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               topics=[OffsetCommitRequestTopic(name="bad-t", partitions=[
                                   OffsetCommitRequestPartition(partition_index=0,
                                                                committed_offset=offset,
                                                                committed_metadata=metadata)
                               ])])


def _still_serving_and_intact(broker: Broker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        resp = client.request(OffsetFetchRequest(group_id="bad-g", topics=[
            OffsetFetchRequestTopic(name="bad-t", partition_indexes=[0])
        ]), 7)
        assert resp.topics[0].partitions[0].committed_offset == 42
    finally:
        client.close()


CLOSING = {
    # JoinGroup v5 with its member list cut short.
    "truncated_join": _frame(11, 5, 1, struct.pack(">h", 3) + b"grp" + b"\x00\x00"),
    # A protocol array that claims two billion entries in a few bytes.
    "join_array_lies": _frame(11, 1, 2, struct.pack(">h", 1) + b"g" + struct.pack(
        ">iih", 10000, 10000, 0) + struct.pack(">h", 8) + b"consumer" + struct.pack(
        ">i", 2_000_000_000)),
    # JoinGroup v9 is not served: the connection closes (KIP-511 is for ApiVersions only).
    "unserved_join_version": _frame(11, 9, 3, b"\x00" * 30, flexible=True),
    "truncated_offset_commit": _frame(8, 8, 4, b"\x04bad", flexible=True),
    # More than socket.request.max.bytes (8 MiB here) is refused before buffering.
    "oversized_sync": struct.pack(">ihhi", 16 << 20, 14, 3, 5) + b"\x00" * 64,
}


@pytest.mark.parametrize("case", sorted(CLOSING))
def test_malformed_group_requests_close_the_connection(broker: Broker, case: str) -> None:
    client = RawClient(broker.bootstrap_servers, timeout_s=5)
    try:
        client.send_raw(CLOSING[case])
        assert client.is_closed_by_peer()
    finally:
        client.close()
    _still_serving_and_intact(broker)


def test_huge_but_valid_group_requests_get_answers(broker: Broker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        join = client.request(JoinGroupRequest(
            group_id="g" * 30000, session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id="", protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"m" * (3 << 20))],
        ), 3)
        assert join.error_code == 0 and join.members[0].metadata == b"m" * (3 << 20)
        too_long = client.request(_commit("bad-g", 7, metadata="x" * 5000), 8)
        assert too_long.topics[0].partitions[0].error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE
        stranger = client.request(SyncGroupRequest(
            group_id="bad-g", generation_id=7, member_id="nobody"), 3)
        assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        empty = client.request(JoinGroupRequest(
            group_id="", session_timeout_ms=10000, member_id="", protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
        assert empty.error_code == ErrorCode.INVALID_GROUP_ID
        no_protocols = client.request(JoinGroupRequest(
            group_id="np", session_timeout_ms=10000, member_id="", protocol_type="consumer",
            protocols=[]), 3)
        assert no_protocols.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    finally:
        client.close()
    _still_serving_and_intact(broker)

"""A follower's SyncGroup is answered only once the leader's assignment is committed.

Found by aiokafka's own ``test_kip_345_enabled`` / ``test_kip_345_disabled``
on a 3-node cluster (tools/client_suites): the leader's SyncGroup writes the
group's assignment to ``__consumer_offsets`` and waits for it to commit, but
a follower whose SyncGroup came in meanwhile found the group already Stable
and got its assignment at once, before the leader got its own and before the
record was durable. Kafka's coordinator runtime defers an operation that
writes nothing behind the writes still pending on its partition, so no member
learns an assignment before it is committed.

Three real nodes, ``__consumer_offsets`` at RF=3 with ``min.insync.replicas=2``;
the two followers of the group's partition are paused (SIGSTOP) while the
leader and then the follower send their SyncGroups, so the leader's record
cannot commit: the follower gets no answer; once they resume, both do.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.heartbeat_request import HeartbeatRequest
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from tests.support.cluster import LocalCluster, wait_for
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(240)

OVERRIDES = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "30000",
}
GROUP = "sync-after-commit"


def join(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
        member_id=member_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"meta")])


def receive(raw: RawClient) -> Any:
    """The next answer on ``raw`` (a request sent with ``send``)."""
    while (got := raw.conn.next_response()) is None:
        data = raw.sock.recv(65536)
        if not data:
            raise ConnectionError("broker closed the connection")
        raw.conn.receive_data(data)
    return got[1]


def send(raw: RawClient, body: Any, version: int) -> None:
    raw.sock.sendall(raw.conn.send(body, version))


def test_a_follower_gets_its_assignment_only_once_the_leaders_is_committed(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides=OVERRIDES)
    cluster.format()
    cluster.start()
    paused: list[int] = []
    try:
        def coordinator() -> int | None:
            raw = RawClient(cluster.bootstrap)
            try:
                resp = raw.request(FindCoordinatorRequest(key_type=0,
                                                          coordinator_keys=[GROUP]), 4)
            finally:
                raw.close()
            c = resp.coordinators[0]
            return int(c.node_id) if c.error_code == 0 else None

        node = wait_for("the group's coordinator", coordinator, 90, 0.2)
        address = f"127.0.0.1:{cluster.nodes[node].client_port}"
        leader, follower = RawClient(address, 30), RawClient(address, 30)

        # Generation 1: the leader alone.
        first = leader.request(join(GROUP), 3)
        assert first.error_code == 0 and first.leader == first.member_id
        a = first.member_id
        assert leader.request(SyncGroupRequest(
            group_id=GROUP, generation_id=first.generation_id, member_id=a,
            assignments=[SyncGroupRequestAssignment(member_id=a, assignment=b"A1")]),
            2).error_code == 0
        # The follower joins; the leader learns of the rebalance and joins again.
        send(follower, join(GROUP), 3)
        beat = leader.request(HeartbeatRequest(group_id=GROUP, generation_id=1,
                                               member_id=a), 2)
        assert beat.error_code == 27  # REBALANCE_IN_PROGRESS
        second = leader.request(join(GROUP, a), 3)
        joined = receive(follower)
        assert second.error_code == joined.error_code == 0
        assert second.generation_id == joined.generation_id == 2
        b = joined.member_id

        # The followers of __consumer_offsets-0 stop: the leader's SyncGroup
        # record cannot reach the high watermark.
        paused = [n for n in cluster.nodes if n != node]
        for n in paused:
            cluster.pause(n)
        send(leader, SyncGroupRequest(
            group_id=GROUP, generation_id=2, member_id=a,
            assignments=[SyncGroupRequestAssignment(member_id=a, assignment=b"A2"),
                         SyncGroupRequestAssignment(member_id=b, assignment=b"B2")]), 2)
        send(follower, SyncGroupRequest(group_id=GROUP, generation_id=2, member_id=b,
                                        assignments=[]), 2)
        follower.sock.settimeout(3)
        with pytest.raises(socket.timeout):
            receive(follower)  # before the fix: B2 at once, uncommitted
        follower.sock.settimeout(60)

        for n in paused:
            cluster.resume(n)
        paused = []
        leader_sync, follower_sync = receive(leader), receive(follower)
        assert (leader_sync.error_code, bytes(leader_sync.assignment)) == (0, b"A2")
        assert (follower_sync.error_code, bytes(follower_sync.assignment)) == (0, b"B2")
        leader.close()
        follower.close()
    finally:
        for n in paused:
            cluster.resume(n)
        cluster.stop()

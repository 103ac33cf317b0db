"""A Connect worker's membership of its group: classic JoinGroup/SyncGroup/Heartbeat.

Protocol type ``connect`` (the coordinator keeps the bytes opaque). One round
(:meth:`ConnectMember.join`): JoinGroup v5+ (no group instance id) offering
the protocols of ``connect.protocol`` with this worker's metadata; a
MEMBER_ID_REQUIRED answer names the member, which joins again with that id.
The leader (the member the coordinator names) runs ``assign`` over every
member's decoded metadata and sends each member's assignment in its SyncGroup;
the others send none. SyncGroup's answer is this member's assignment. Between
rounds :meth:`heartbeat` keeps the membership (every ``heartbeat.interval.ms``,
by the caller); REBALANCE_IN_PROGRESS means the group is rebalancing (join
again), UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION that the coordinator dropped the
member (join again with no id). :meth:`leave` sends LeaveGroup.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, KafkaError
from odradek.connect.distributed.protocol import (
    CONNECT_PROTOCOL_TYPE,
    Assignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    protocols,
    version_of,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.heartbeat_request import HeartbeatRequest
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment

log = logging.getLogger(__name__)

#: The leader's assignor: (generation, leader member id, protocol version, members) ->
#: each member's assignment.
Assign = Callable[[int, str, Mapping[str, WorkerState]], Mapping[str, Assignment]]

RETRY = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS})
DROPPED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                     ErrorCode.FENCED_INSTANCE_ID})
RETRY_BACKOFF_S = 0.2


class Rejoin(Exception):
    """The round failed in a way a new JoinGroup fixes (logged, not fatal)."""


@dataclass
class Joined:
    """One completed round: this member's assignment and the generation."""

    generation: int
    member_id: str
    leader: bool
    assignment: Assignment


class ConnectMember:
    def __init__(self, client: KafkaClient, group: str, connect_protocol: str, *,
                 session_timeout_ms: int, rebalance_timeout_ms: int) -> None:
        self.client = client
        self.group = group
        self.offered = protocols(connect_protocol)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.version = self.offered[0][1]

    async def join(self, state: WorkerState, assign: Assign) -> Joined:
        """One JoinGroup + SyncGroup round; raises :class:`Rejoin` to be retried."""
        try:
            return await self._join(state, assign)
        except (TimeoutError, ClientError, KafkaError, OSError) as e:
            await asyncio.sleep(RETRY_BACKOFF_S)
            raise Rejoin(f"group {self.group}: {e}") from None

    async def _join(self, state: WorkerState, assign: Assign) -> Joined:
        conn = await self.client.coordinator(self.group)
        offered = [JoinGroupRequestProtocol(name=n, metadata=encode_metadata(state, v))
                   for n, v in self.offered]
        while True:
            request = JoinGroupRequest(
                group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                group_instance_id=None, protocol_type=CONNECT_PROTOCOL_TYPE, protocols=offered,
                reason=None)
            resp = await asyncio.wait_for(conn.request(request, 9, 5),
                                          self.rebalance_timeout_ms / 1000 + 10)
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            break
        if resp.error_code in DROPPED:
            self.member_id = ""
        if resp.error_code:
            await asyncio.sleep(RETRY_BACKOFF_S)
            raise Rejoin(f"JoinGroup: {ErrorCode(resp.error_code).name}")
        self.member_id, self.generation = resp.member_id, resp.generation_id
        name = resp.protocol_name or self.offered[0][0]
        self.version = version_of(name)
        leader = resp.leader == self.member_id
        assignments: list[SyncGroupRequestAssignment] = []
        if leader:
            members = {}
            for m in resp.members:
                try:
                    members[m.member_id] = decode_metadata(m.metadata)[1]
                except ValueError as e:
                    log.warning("member %s sent bad metadata (%s); left out", m.member_id, e)
            answer = assign(self.generation, self.member_id, members)
            assignments = [SyncGroupRequestAssignment(member_id=m,
                                                      assignment=encode_assignment(a, self.version))
                           for m, a in answer.items()]
        sync = await asyncio.wait_for(conn.request(SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None, protocol_type=CONNECT_PROTOCOL_TYPE, protocol_name=name,
            assignments=assignments), 5, 3), self.rebalance_timeout_ms / 1000 + 10)
        if sync.error_code in DROPPED:
            self.member_id = ""
        if sync.error_code:
            await asyncio.sleep(RETRY_BACKOFF_S)
            raise Rejoin(f"SyncGroup: {ErrorCode(sync.error_code).name}")
        try:
            mine = decode_assignment(sync.assignment)
        except ValueError as e:
            raise Rejoin(f"SyncGroup: a bad assignment ({e})") from None
        return Joined(self.generation, self.member_id, leader, mine)

    async def heartbeat(self) -> bool:
        """One heartbeat; False when the member must join again."""
        try:
            conn = await self.client.coordinator(self.group)
            resp = await asyncio.wait_for(conn.request(HeartbeatRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=None), 4), self.session_timeout_ms / 1000)
        except (TimeoutError, ClientError, KafkaError, OSError) as e:
            log.warning("heartbeat to group %s failed: %s", self.group, e)
            return True  # the session timeout decides; try again next interval
        if resp.error_code in DROPPED:
            self.member_id = ""
            return False
        if resp.error_code in RETRY:
            return False
        if resp.error_code:
            log.warning("heartbeat: %s", ErrorCode(resp.error_code).name)
            return False
        return True

    async def leave(self) -> None:
        """LeaveGroup; errors ignored (the session timeout drops a silent member)."""
        if not self.member_id:
            return
        try:
            conn = await self.client.coordinator(self.group)
            version = conn.version_for(LeaveGroupRequest.API_KEY, 5)
            request = (LeaveGroupRequest(group_id=self.group, members=[MemberIdentity(
                member_id=self.member_id, reason="worker stopping")]) if version >= 3
                else LeaveGroupRequest(group_id=self.group, member_id=self.member_id))
            await asyncio.wait_for(conn.request(request, version, version), 5.0)
        except (TimeoutError, KafkaError, ClientError, OSError):
            pass
        self.member_id = ""

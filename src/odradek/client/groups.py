"""Group requests of the client: committed offsets, listing, describing, deleting.

All go to the group's coordinator (FindCoordinator). Commits are standalone
(generation -1, no member id): what admin tools and the CLI do, which Kafka
accepts for a group with no active members.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from odradek.wire.messages.delete_groups_request import DeleteGroupsRequest
from odradek.wire.messages.describe_groups_request import DescribeGroupsRequest
from odradek.wire.messages.list_groups_request import ListGroupsRequest
from odradek.wire.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.wire.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member] = field(default_factory=list)


async def fetch_committed(
    client: KafkaClient, group: str, topic: str, partitions: list[int]
) -> dict[int, int]:
    """Committed offsets of ``topic``'s ``partitions``: partition -> offset (-1: none)."""
    every = await _offset_fetch(client, group, [
        OffsetFetchRequestTopic(name=topic, partition_indexes=list(partitions))
    ])
    return {p: o for (_, p), o in every.items()}


async def fetch_all_committed(client: KafkaClient, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group``: (topic, partition) -> offset."""
    return await _offset_fetch(client, group, None)


async def _offset_fetch(
    client: KafkaClient, group: str, topics: list[OffsetFetchRequestTopic] | None
) -> dict[tuple[str, int], int]:
    conn = await client.coordinator(group)
    resp = await conn.request(OffsetFetchRequest(group_id=group, topics=topics), 7, 2)
    check(resp.error_code, f"group {group!r}")
    out: dict[tuple[str, int], int] = {}
    for t in resp.topics:
        for p in t.partitions:
            check(p.error_code)
            out[(t.name, p.partition_index)] = p.committed_offset
    return out


async def commit_offsets(
    client: KafkaClient, group: str, topic: str, offsets: dict[int, int]
) -> None:
    if not offsets:
        return
    conn = await client.coordinator(group)
    resp = await conn.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                         committed_metadata="")
            for p, o in sorted(offsets.items())
        ])],
    ), 8, 2)
    for t in resp.topics:
        for p in t.partitions:
            check(p.error_code, f"commit of {topic}-{p.partition_index} for group {group!r}")


async def list_groups(client: KafkaClient) -> list[tuple[str, str, str]]:
    """(group id, protocol type, state) of every group the bootstrap broker knows."""
    resp = await client.request(ListGroupsRequest(), 4)
    check(resp.error_code)
    return sorted((g.group_id, g.protocol_type, g.group_state or "") for g in resp.groups)


async def describe_group(client: KafkaClient, group: str) -> GroupDescription:
    """A KIP-848 consumer group through ConsumerGroupDescribe (its assignor
    standing for the protocol); any other group (ConsumerGroupDescribe says
    GROUP_ID_NOT_FOUND) through DescribeGroups, as Kafka's admin client does."""
    conn = await client.coordinator(group)
    cresp = await conn.request(ConsumerGroupDescribeRequest(group_ids=[group]), 0)
    (cg,) = cresp.groups
    if cg.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        check(cg.error_code, f"group {group!r}")
        return GroupDescription(cg.group_id, cg.group_state, "consumer", cg.assignor_name, [
            Member(m.member_id, m.client_id, m.client_host,
                   {tp.topic_name: sorted(tp.partitions)
                    for tp in m.assignment.topic_partitions})
            for m in cg.members])
    resp = await conn.request(DescribeGroupsRequest(groups=[group]), 5)
    (g,) = resp.groups
    check(g.error_code, f"group {group!r}")
    members = []
    for m in g.members:
        assignment: dict[str, list[int]] = {}
        if g.protocol_type == "consumer" and len(m.member_assignment) >= 2:
            version = int.from_bytes(m.member_assignment[:2], "big", signed=True)
            decoded = ConsumerProtocolAssignment.decode(
                memoryview(m.member_assignment)[2:], max(0, min(version, 3))
            )
            assignment = {tp.topic: list(tp.partitions) for tp in decoded.assigned_partitions}
        members.append(Member(m.member_id, m.client_id, m.client_host, assignment))
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                            members)


async def delete_group(client: KafkaClient, group: str) -> None:
    conn = await client.coordinator(group)
    resp = await conn.request(DeleteGroupsRequest(groups_names=[group]), 2)
    check(resp.results[0].error_code, f"group {group!r}")

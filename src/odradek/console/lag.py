"""Consumer-group lag: per partition, the log end offset minus the committed
offset (partitions without a commit have no lag, as Kafka's tool shows "-")."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.client import LATEST, KafkaClient
from odradek.client.groups import GroupDescription, describe_group, fetch_all_committed, list_groups


@dataclass(frozen=True, slots=True)
class LagSample:
    at: float
    """Unix time in seconds."""
    total: int
    partitions: dict[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    member: str | None
    client_id: str | None
    host: str | None


async def end_offsets(client: KafkaClient,
                      keys: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in keys}):
        try:
            leaders = await client.partitions(topic)
        except Exception:  # a deleted topic's old commits: no end offset
            continue
        wanted = {p: leaders[p] for t, p in keys if t == topic and p in leaders}
        for p, end in (await client.list_offsets(topic, wanted, LATEST)).items():
            out[(topic, p)] = end
    return out


async def group_lag(client: KafkaClient, group: str) -> tuple[GroupDescription, list[LagRow]]:
    desc = await describe_group(client, group)
    committed = await fetch_all_committed(client, group)
    owner = {(t, p): m for m in desc.members for t, ps in m.assignment.items() for p in ps}
    keys = set(committed) | set(owner)
    ends = await end_offsets(client, keys)
    rows = []
    for key in sorted(keys):
        current = committed.get(key, -1)
        end = ends.get(key)
        m = owner.get(key)
        rows.append(LagRow(
            key[0], key[1], current if current >= 0 else None, end,
            end - current if current >= 0 and end is not None else None,
            m.member_id if m else None, m.client_id if m else None, m.client_host if m else None))
    return desc, rows


async def sample_all(client: KafkaClient) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's lag per partition that has a commit."""
    out: dict[str, dict[tuple[str, int], int]] = {}
    for group, _, _ in await list_groups(client):
        committed = {k: o for k, o in (await fetch_all_committed(client, group)).items()
                     if o >= 0}
        ends = await end_offsets(client, set(committed))
        out[group] = {k: max(0, ends[k] - o) for k, o in committed.items() if k in ends}
    return out

"""A small Kafka client over :mod:`odradek.wire`: what the CLI (and later the
replica fetchers and benchmarks) need, speaking the protocol as any client does.

:class:`KafkaClient` connects to the first bootstrap address that answers,
learns the brokers from Metadata, and routes partition requests to each
partition's leader and group requests to the group's coordinator, one
connection per broker. It works against any Kafka-compatible broker.

Records: :func:`partition_for_key` is Kafka's default partitioner (murmur2 of
the key, positive, modulo the partition count), so keyed records land where
Java, librdkafka (``murmur2_random``) and kafka-python put them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.connection import ClientError, Connection, KafkaError, check
from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.metadata_response import MetadataResponse
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.primitives import DecodeError
from odradek.wire.records import CONTROL_ABORT, Record, control_record_type, decode_batch

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# The newest version of each API this client is tested with.
MAX_VERSIONS = {
    "produce": 9, "fetch": 12, "list_offsets": 7, "metadata": 12, "find_coordinator": 4,
}


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class KafkaClient:
    def __init__(self, bootstrap: Connection, client_id: str,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.security = security
        """TLS and SASL settings of every connection this client opens."""
        self._nodes: dict[int, str] = {}
        self._connections: dict[str, Connection] = {bootstrap.address: bootstrap}

    @classmethod
    async def connect(cls, bootstrap_servers: str, client_id: str = "odradek-cli",
                      timeout_s: float = 10.0, security: ClientSecurity = PLAINTEXT
                      ) -> KafkaClient:
        errors = []
        for address in [a.strip() for a in bootstrap_servers.split(",") if a.strip()]:
            try:
                return cls(await Connection.open(address, client_id, timeout_s, security),
                           client_id, security)
            except ClientError as exc:
                errors.append(str(exc))
        raise ClientError("; ".join(errors) or "no bootstrap server given")

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()

    async def request(self, body: Any, max_version: int, min_version: int = 0) -> Any:
        """Send to the bootstrap broker (admin requests any broker may answer)."""
        return await self.bootstrap.request(body, max_version, min_version)

    async def node(self, node_id: int) -> Connection:
        address = self._nodes.get(node_id)
        if address is None:
            await self.metadata([])
            address = self._nodes.get(node_id)
            if address is None:
                raise ClientError(f"broker {node_id} is not in the cluster metadata")
        conn = self._connections.get(address)
        if conn is None:
            conn = self._connections[address] = await Connection.open(
                address, self.client_id, security=self.security)
        return conn

    # -- metadata -----------------------------------------------------------------------

    async def metadata(
        self, topics: Sequence[str] | None, allow_create: bool = False
    ) -> MetadataResponse:
        """Topics' metadata (None: every topic); brokers are remembered for routing."""
        wanted = None if topics is None else [MetadataRequestTopic(name=t) for t in topics]
        resp: MetadataResponse = await self.request(
            MetadataRequest(topics=wanted, allow_auto_topic_creation=allow_create),
            MAX_VERSIONS["metadata"], 1,
        )
        self._nodes = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
        return resp

    async def partitions(self, topic: str) -> dict[int, int]:
        """partition -> leader id of ``topic``; KafkaError if it does not exist."""
        resp = await self.metadata([topic])
        (t,) = resp.topics
        check(t.error_code, f"topic {topic!r}")
        return {p.partition_index: p.leader_id for p in t.partitions}

    # -- records ------------------------------------------------------------------------

    async def produce(
        self, topic: str, partition: int, leader: int, batch: bytes, acks: int = -1,
        timeout_ms: int = 30000,
    ) -> int:
        """Append one record batch; the base offset assigned (-1 with acks=0, which
        the broker does not answer: it returns once the bytes are sent)."""
        conn = await self.node(leader)
        request = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
            TopicProduceData(name=topic, partition_data=[
                PartitionProduceData(index=partition, records=batch)
            ])
        ])
        if acks == 0:
            await conn.send_only(request, MAX_VERSIONS["produce"], 3)
            return -1
        resp = await conn.request(request, MAX_VERSIONS["produce"], 3)
        p = resp.responses[0].partition_responses[0]
        check(p.error_code, getattr(p, "error_message", None))
        return int(p.base_offset)

    async def list_offsets(
        self, topic: str, leaders: dict[int, int], timestamp: int
    ) -> dict[int, int]:
        """partition -> offset for ``timestamp`` (EARLIEST, LATEST, or ms)."""
        out: dict[int, int] = {}
        for leader in set(leaders.values()):
            conn = await self.node(leader)
            parts = [p for p, node in leaders.items() if node == leader]
            resp = await conn.request(ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in parts
                ])
            ]), MAX_VERSIONS["list_offsets"], 1)
            for lp in resp.topics[0].partitions:
                check(lp.error_code, f"{topic}-{lp.partition_index}")
                out[lp.partition_index] = lp.offset
        return out

    async def fetch(
        self, topic: str, leader: int, offsets: dict[int, int], max_wait_ms: int = 500,
        partition_max_bytes: int = 1 << 20, isolation_level: int = READ_UNCOMMITTED,
        seen: FetchSeen | None = None,
    ) -> tuple[dict[int, list[Record]], dict[int, int]]:
        """Records from ``offsets`` on (partition -> offset), and each partition's
        high watermark (with READ_COMMITTED: the last stable offset, and the
        records of aborted transactions left out, as Kafka's consumer does).
        Whole batches come back; records before the asked offset are dropped
        here, control records are skipped (and counted in ``seen``)."""
        conn = await self.node(leader)
        resp = await conn.request(FetchRequest(
            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=64 << 20,
            isolation_level=isolation_level,
            topics=[FetchTopic(topic=topic, partitions=[
                FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
                for p, o in offsets.items()
            ])],
        ), MAX_VERSIONS["fetch"], 4)
        records: dict[int, list[Record]] = {}
        watermarks: dict[int, int] = {}
        for t in resp.responses:
            for p in t.partitions:
                check(p.error_code, f"{topic}-{p.partition_index}")
                watermarks[p.partition_index] = (
                    p.last_stable_offset if isolation_level == READ_COMMITTED
                    and p.last_stable_offset >= 0 else p.high_watermark)
                aborted = sorted((a.first_offset, a.producer_id)
                                 for a in p.aborted_transactions or ())
                records[p.partition_index] = list(_records_from(
                    bytes(p.records or b""), offsets[p.partition_index],
                    aborted if isolation_level == READ_COMMITTED else None,
                    seen if seen is not None else FetchSeen()))
        return records, watermarks

    # -- groups -------------------------------------------------------------------------

    async def coordinator(self, key: str, key_type: int = 0) -> Connection:
        """The coordinator of group ``key`` (``key_type`` 0) or of transactional id
        ``key`` (``key_type`` 1)."""
        version = self.bootstrap.version_for(
            10, MAX_VERSIONS["find_coordinator"], 1 if key_type else 0)
        request = (
            FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]) if version >= 4
            else FindCoordinatorRequest(key=key, key_type=key_type)
        )
        resp = await self.bootstrap.request(request, version, version)
        if resp.coordinators:
            c = resp.coordinators[0]
            check(c.error_code, c.error_message)
            node_id, host, port = c.node_id, c.host, c.port
        else:
            check(resp.error_code, resp.error_message)
            node_id, host, port = resp.node_id, resp.host, resp.port
        self._nodes[node_id] = f"{host}:{port}"
        return await self.node(node_id)


@dataclass
class FetchSeen:
    """What a fetch passed over: abort markers (a read_uncommitted reader has
    printed those transactions' records) and records it left out as aborted."""

    abort_markers: int = 0
    aborted_skipped: int = 0


def _records_from(data: bytes, first_offset: int,
                  aborted: list[tuple[int, int]] | None, seen: FetchSeen) -> Iterable[Record]:
    """The records of the batches in ``data`` from ``first_offset`` on. With
    ``aborted`` (read_committed: the response's aborted transactions as sorted
    (first offset, producer id)), a transactional batch of a producer whose
    aborted transaction began at or before it is left out, up to that
    producer's abort marker: Kafka's consumer rule."""
    pos = 0
    pending = list(reversed(aborted or ()))
    open_aborts: set[int] = set()
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if size < 12 or pos + size > len(data):
            return  # the partial batch a fetch may end with: fetched again next time
        try:
            header, records = decode_batch(data, pos)
        except DecodeError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
        pos += header.size
        while pending and pending[-1][0] <= header.last_offset:
            open_aborts.add(pending.pop()[1])
        if header.is_control:
            if records and control_record_type(records[0]) == CONTROL_ABORT:
                seen.abort_markers += 1
                open_aborts.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in open_aborts:
            seen.aborted_skipped += len(records)
            continue
        for r in records:
            if r.offset >= first_offset:
                yield r

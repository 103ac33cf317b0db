"""Capture request frames from real Kafka clients for the golden-frame tests.

Re-run (about a minute; needs confluent-kafka, kafka-python and aiokafka)::

    python -m tools.capture_frames --out tests/golden

then review and commit ``tests/golden``. CI does not run this tool; it runs
``tests/unit/test_golden_frames.py`` over the committed frames.

How it works. Each *run* (one client doing one thing) gets its own fake broker:
an asyncio server on 127.0.0.1, on an ephemeral port, built on
:mod:`odradek.wire.frames`. It plays a single-node cluster (node 0, itself)
just well enough for the client to send its requests, and records every request
frame it receives, as bytes without the size prefix. It is a test tool, not a
broker: it stores nothing and every answer is "success":

* ApiVersions: the advertisement of research §1.6 (:data:`ADVERTISED`); a
  version above 3 gets a v0 body with error 35 and the full list (KIP-511);
* Metadata: itself as broker 0 and each requested topic (the capture topic when
  all topics are asked for) with :data:`PARTITIONS` partitions led by node 0;
* Produce: base offsets counting from 0; Fetch: no records, held until ``max_wait_ms`` (capped
  at :data:`FETCH_HOLD_MAX_MS`) like a broker's fetch purgatory; ListOffsets:
  offset 0; FindCoordinator: itself; JoinGroup: the caller is the leader of a
  one-member group, generation 1; SyncGroup: the leader's own assignment back;
  Heartbeat, LeaveGroup, OffsetCommit: no error; OffsetFetch: no committed
  offset (-1); InitProducerId: producer id 1000, epoch 0; CreateTopics: created.

Anything else (a frame that does not parse, an API it does not advertise, a
handler that fails) is recorded as an error, the connection is closed and the
run fails.

Runs: confluent-kafka (librdkafka) producers, one per codec in :data:`CODECS`,
idempotent; a confluent-kafka consumer in a group; kafka-python's
KafkaProducer (idempotent by default) and KafkaConsumer; aiokafka's producer
(idempotent, gzip) and consumer. Producers send :data:`RECORDS` (fixed keys,
values, headers and timestamps) to partition 0; consumers subscribe to
:data:`TOPIC` in :data:`GROUP`, wait for a Fetch and a Heartbeat, commit
offset :data:`COMMIT_OFFSET` with metadata :data:`COMMIT_METADATA` on
partition 0, and close (LeaveGroup). Waits poll the client with a deadline.

Output: ``<out>/<client>/<ApiName>-v<version>-<n>.bin``, one frame per
(client, API, version), and for Produce one per codec; ``n`` numbers the files
sharing a (client, API, version). Where a client sends several frames of one
(API, version), the first "interesting" one is kept (Metadata naming the
topic, Fetch and OffsetFetch naming partitions, SyncGroup assigning some).
``<out>/manifest.json`` lists every file with the values its run was
configured with (never values read back from the frames), which the tests
check the decoded frames against.

Determinism: the values are fixed, so a re-capture decodes to the same
requests; its bytes may still differ in correlation ids, the order in which a
client lists partitions, and the timestamp in aiokafka's gzip header.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from odradek.wire import api
from odradek.wire.frames import (
    BadRequest,
    FrameError,
    ServerConnection,
    encode_response,
    parse_request,
)
from odradek.wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from odradek.wire.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from odradek.wire.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.wire.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from odradek.wire.messages.heartbeat_response import HeartbeatResponse
from odradek.wire.messages.init_producer_id_response import InitProducerIdResponse
from odradek.wire.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from odradek.wire.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from odradek.wire.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from odradek.wire.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from odradek.wire.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from odradek.wire.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from odradek.wire.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.wire.messages.sync_group_response import SyncGroupResponse
from odradek.wire.schema import Message

# -- what the fake broker advertises and answers ------------------------------

ADVERTISED: Final[dict[int, tuple[int, int]]] = {
    0: (0, 9),  # Produce (min 0: librdkafka's compression check, KAFKA-18659)
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 8),  # OffsetFetch
    10: (0, 4),  # FindCoordinator
    11: (0, 7),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 4),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    18: (0, 3),  # ApiVersions
    19: (0, 5),  # CreateTopics
    22: (0, 4),  # InitProducerId
}

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS, CREATE_TOPICS, INIT_PRODUCER_ID = (
    12, 13, 14, 18, 19, 22,
)
UNSUPPORTED_VERSION: Final = 35

HOST: Final = "127.0.0.1"
CLUSTER_ID: Final = "golden-capture-cluster"
PRODUCER_ID: Final = 1000
MEMBER_ID: Final = "golden-member-1"
GENERATION_ID: Final = 1
FETCH_HOLD_MAX_MS: Final = 200

# -- what the clients are made to do ------------------------------------------

TOPIC: Final = "golden-topic"
PARTITIONS: Final = 2
GROUP: Final = "golden-group"
COMMIT_OFFSET: Final = 3
COMMIT_METADATA: Final = "golden-meta"
CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP_MS: Final = 1_700_000_000_000
FETCH_WAIT_MS: Final = 100
RUN_DEADLINE_S: Final = 60.0


@dataclass(frozen=True)
class GoldenRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int

    def to_json(self) -> dict[str, Any]:
        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("ascii")

        return {
            "key": text(self.key),
            "value": text(self.value),
            "headers": [[k, text(v)] for k, v in self.headers],
            "timestamp_ms": self.timestamp_ms,
        }


# Values repeat so every codec actually shrinks the batch (librdkafka sends a
# batch uncompressed when compression does not help).
RECORDS: Final = (
    GoldenRecord(b"key-0", b"golden value zero " * 10, (("trace", b"t-0"),), BASE_TIMESTAMP_MS),
    GoldenRecord(
        b"key-1",
        b"golden value one " * 10,
        (("trace", b"t-1"), ("empty", b"")),
        BASE_TIMESTAMP_MS + 7,
    ),
    GoldenRecord(b"key-2", None, (), BASE_TIMESTAMP_MS + 9),  # a tombstone
    GoldenRecord(None, b"golden value three " * 10, (), BASE_TIMESTAMP_MS + 20),
)


# -- the fake broker -----------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    api_key: int
    api_version: int
    frame: bytes


class FakeBroker:
    """A one-node fake cluster that records every request frame; see the module docstring."""

    def __init__(self) -> None:
        self.port = 0
        self._frames: list[Captured] = []
        self._lock = threading.Lock()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()
        self._next_offset: dict[tuple[str, int], int] = {}
        self.errors: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def frames(self) -> list[Captured]:
        with self._lock:
            return list(self._frames)

    def saw(self, *api_keys: int) -> bool:
        """True once at least one request of each of ``api_keys`` has arrived."""
        with self._lock:
            seen = {c.api_key for c in self._frames}
        return set(api_keys) <= seen

    async def __aenter__(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = ServerConnection()
        try:
            while data := await reader.read(65536):
                conn.receive_data(data)
                while (frame := conn.next_frame()) is not None:
                    parts = await self._answer(bytes(frame))
                    if parts is None:
                        return
                    writer.writelines(parts)
                    await writer.drain()
        except FrameError as exc:
            self.errors.append(f"framing error: {exc}")
        except ConnectionError:
            pass  # the client hung up, as clients do on close
        except Exception as exc:  # a bug in a handler: fail the run, loudly
            self.errors.append(f"handler failed: {exc!r}")
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _answer(self, frame: bytes) -> list[Any] | None:
        """Record ``frame`` and return the response parts; [] for none, None to hang up."""
        req = parse_request(frame)
        if isinstance(req, BadRequest):
            self.errors.append(f"bad request {req}")
            return None
        with self._lock:
            self._frames.append(Captured(req.api_key, req.api_version, frame))
        handler = _HANDLERS.get(req.api_key)
        if handler is None or req.api_key not in ADVERTISED:
            self.errors.append(f"unhandled {api.api_name(req.api_key)} v{req.api_version}")
            return None
        if req.api_key == FETCH:
            await self._hold_fetch(req.body.max_wait_ms)
        if req.api_key == PRODUCE and req.body.acks == 0:
            handler(self, req.body, req.api_version)  # acks=0 has no response
            return []
        version, body = handler(self, req.body, req.api_version)
        return encode_response(req.api_key, version, req.correlation_id, body)

    async def _hold_fetch(self, max_wait_ms: int) -> None:
        """Wait like a fetch purgatory: until max_wait_ms (capped) or shutdown."""
        hold_s = min(max(max_wait_ms, 0), FETCH_HOLD_MAX_MS) / 1000
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), hold_s)

    def take_offset(self, topic: str, partition: int, count: int) -> int:
        base = self._next_offset.get((topic, partition), 0)
        self._next_offset[(topic, partition)] = base + count
        return base


Handler = Callable[[FakeBroker, Any, int], tuple[int, Message]]


def _api_versions(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    keys = [ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(ADVERTISED.items())]
    lo, hi = ADVERTISED[API_VERSIONS]
    if not lo <= v <= hi:
        return 0, ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=keys)
    return v, ApiVersionsResponse(api_keys=keys)


def _metadata(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    all_topics = body.topics is None or (v == 0 and not body.topics)
    names = [TOPIC] if all_topics else [t.name for t in body.topics]
    partitions = [
        MetadataResponsePartition(
            partition_index=i, leader_id=0, leader_epoch=0, replica_nodes=[0], isr_nodes=[0]
        )
        for i in range(PARTITIONS)
    ]
    return v, MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=0, host=HOST, port=b.port)],
        cluster_id=CLUSTER_ID,
        controller_id=0,
        topics=[MetadataResponseTopic(name=n, partitions=list(partitions)) for n in names],
    )


def _produce(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(
                        index=p.index,
                        base_offset=b.take_offset(t.name, p.index, 1),
                        log_start_offset=0,
                    )
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ]
    )


def _fetch(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic=t.topic,
                partitions=[
                    PartitionData(
                        partition_index=p.partition,
                        high_watermark=0,
                        last_stable_offset=0,
                        log_start_offset=0,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
    )


def _list_offsets(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        old_style_offsets=[0] if v == 0 else [],
                        offset=0,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
    )


def _find_coordinator(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    if v >= 4:
        return v, FindCoordinatorResponse(
            coordinators=[
                Coordinator(key=k, node_id=0, host=HOST, port=b.port)
                for k in body.coordinator_keys
            ]
        )
    return v, FindCoordinatorResponse(node_id=0, host=HOST, port=b.port)


def _join_group(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    chosen = body.protocols[0]
    return v, JoinGroupResponse(
        generation_id=GENERATION_ID,
        protocol_type=body.protocol_type,
        protocol_name=chosen.name,
        leader=MEMBER_ID,
        member_id=MEMBER_ID,
        members=[
            JoinGroupResponseMember(
                member_id=MEMBER_ID,
                group_instance_id=body.group_instance_id,
                metadata=chosen.metadata,
            )
        ],
    )


def _sync_group(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    mine = [a.assignment for a in body.assignments if a.member_id == body.member_id]
    return v, SyncGroupResponse(
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
        assignment=mine[0] if mine else b"",
    )


def _heartbeat(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, HeartbeatResponse()


def _leave_group(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, LeaveGroupResponse(
        members=[
            MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id)
            for m in body.members
        ]
    )


def _offset_fetch(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    if v >= 8:
        return v, OffsetFetchResponse(
            groups=[
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=t.name,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=i, committed_offset=-1, metadata=""
                                )
                                for i in t.partition_indexes
                            ],
                        )
                        for t in g.topics or []
                    ],
                )
                for g in body.groups
            ]
        )
    return v, OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=i, committed_offset=-1, metadata=""
                    )
                    for i in t.partition_indexes
                ],
            )
            for t in body.topics or []
        ]
    )


def _offset_commit(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
    )


def _init_producer_id(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)


def _create_topics(b: FakeBroker, body: Any, v: int) -> tuple[int, Message]:
    return v, CreateTopicsResponse(
        topics=[
            CreatableTopicResult(
                name=t.name, num_partitions=t.num_partitions, replication_factor=1
            )
            for t in body.topics
        ]
    )


_HANDLERS: Final[dict[int, Handler]] = {
    API_VERSIONS: _api_versions,
    METADATA: _metadata,
    PRODUCE: _produce,
    FETCH: _fetch,
    LIST_OFFSETS: _list_offsets,
    FIND_COORDINATOR: _find_coordinator,
    JOIN_GROUP: _join_group,
    SYNC_GROUP: _sync_group,
    HEARTBEAT: _heartbeat,
    LEAVE_GROUP: _leave_group,
    OFFSET_FETCH: _offset_fetch,
    OFFSET_COMMIT: _offset_commit,
    INIT_PRODUCER_ID: _init_producer_id,
    CREATE_TOPICS: _create_topics,
}


# -- the runs ------------------------------------------------------------------


@dataclass
class Run:
    """One client doing one thing against its own fake broker."""

    client: str
    name: str
    drive: Callable[[FakeBroker, Run], Awaitable[None]]
    client_id: str
    codec: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)


def _deadline_passed(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{what}: gave up after {RUN_DEADLINE_S} s")


def _producer_expect(run: Run, acks: int, idempotent: bool) -> None:
    run.expect.update(
        topic=TOPIC,
        partition=0,
        codec=run.codec,
        acks=acks,
        records=[r.to_json() for r in RECORDS],
        producer_id=PRODUCER_ID if idempotent else -1,
        producer_epoch=0 if idempotent else -1,
        base_sequence=0 if idempotent else -1,
    )


def _consumer_expect(run: Run, isolation_level: int) -> None:
    run.expect.update(
        topic=TOPIC,
        partitions=PARTITIONS,
        group_id=GROUP,
        member_id=MEMBER_ID,
        generation_id=GENERATION_ID,
        isolation_level=isolation_level,
        max_wait_ms=FETCH_WAIT_MS,
        commit={"partition": 0, "offset": COMMIT_OFFSET, "metadata": COMMIT_METADATA},
    )


async def confluent_producer(broker: FakeBroker, run: Run) -> None:
    await asyncio.to_thread(_confluent_producer, broker.bootstrap, run)


def _confluent_producer(bootstrap: str, run: Run) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": run.client_id,
            "compression.type": run.codec,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 100,
        }
    )
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for r in RECORDS:
        producer.produce(
            TOPIC,
            value=r.value,
            key=r.key,
            partition=0,
            timestamp=r.timestamp_ms,
            headers=list(r.headers),
            on_delivery=on_delivery,
        )
    left = producer.flush(RUN_DEADLINE_S)
    producer.close()
    if left or failures:
        raise RuntimeError(f"{run.name}: {left} undelivered, failures {failures}")


async def confluent_consumer(broker: FakeBroker, run: Run) -> None:
    await asyncio.to_thread(_confluent_consumer, broker, run)


def _confluent_consumer(broker: FakeBroker, run: Run) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": run.client_id,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "heartbeat.interval.ms": 100,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not broker.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            consumer.poll(0.1)
        tp = confluent_kafka.TopicPartition(TOPIC, 0, COMMIT_OFFSET, COMMIT_METADATA)
        consumer.commit(offsets=[tp], asynchronous=False)
    finally:
        consumer.close()


async def kafka_python_producer(broker: FakeBroker, run: Run) -> None:
    await asyncio.to_thread(_kafka_python_producer, broker.bootstrap, run)


def _kafka_python_producer(bootstrap: str, run: Run) -> None:
    import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=run.client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=100,
    )
    try:
        futures = [
            producer.send(
                TOPIC,
                value=r.value,
                key=r.key,
                headers=list(r.headers),
                partition=0,
                timestamp_ms=r.timestamp_ms,
            )
            for r in RECORDS
        ]
        producer.flush(timeout=RUN_DEADLINE_S)
        for f in futures:
            f.get(timeout=RUN_DEADLINE_S)
    finally:
        producer.close(timeout=10)


async def kafka_python_consumer(broker: FakeBroker, run: Run) -> None:
    await asyncio.to_thread(_kafka_python_consumer, broker, run)


def _kafka_python_consumer(broker: FakeBroker, run: Run) -> None:
    import kafka
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = kafka.KafkaConsumer(
        TOPIC,
        bootstrap_servers=broker.bootstrap,
        client_id=run.client_id,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=FETCH_WAIT_MS,
        heartbeat_interval_ms=100,
    )
    try:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not broker.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            consumer.poll(timeout_ms=100)
        offsets = {TopicPartition(TOPIC, 0): OffsetAndMetadata(COMMIT_OFFSET, COMMIT_METADATA, -1)}
        consumer.commit(offsets)
    finally:
        consumer.close()


async def aiokafka_producer(broker: FakeBroker, run: Run) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap,
        client_id=run.client_id,
        acks="all",
        enable_idempotence=True,
        compression_type=run.codec,
        linger_ms=100,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                TOPIC,
                value=r.value,
                key=r.key,
                headers=list(r.headers),
                partition=0,
                timestamp_ms=r.timestamp_ms,
            )
            for r in RECORDS
        ]
        await asyncio.wait_for(asyncio.gather(*futures), RUN_DEADLINE_S)
    finally:
        await producer.stop()


async def aiokafka_consumer(broker: FakeBroker, run: Run) -> None:
    import aiokafka
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    consumer = aiokafka.AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=broker.bootstrap,
        client_id=run.client_id,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=FETCH_WAIT_MS,
        heartbeat_interval_ms=100,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not broker.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            await consumer.getmany(timeout_ms=100)
        await consumer.commit(
            {TopicPartition(TOPIC, 0): OffsetAndMetadata(COMMIT_OFFSET, COMMIT_METADATA)}
        )
    finally:
        await consumer.stop()


def runs() -> list[Run]:
    out: list[Run] = []
    for codec in CODECS:
        run = Run("confluent-kafka", f"producer-{codec}", confluent_producer,
                  f"golden-ck-producer-{codec}", codec)
        _producer_expect(run, acks=-1, idempotent=True)
        out.append(run)
    run = Run("confluent-kafka", "consumer", confluent_consumer, "golden-ck-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    run = Run("kafka-python", "producer-none", kafka_python_producer,
              "golden-kp-producer", "none")
    _producer_expect(run, acks=-1, idempotent=True)
    out.append(run)
    run = Run("kafka-python", "consumer", kafka_python_consumer, "golden-kp-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    run = Run("aiokafka", "producer-gzip", aiokafka_producer, "golden-aio-producer", "gzip")
    _producer_expect(run, acks=-1, idempotent=True)
    out.append(run)
    run = Run("aiokafka", "consumer", aiokafka_consumer, "golden-aio-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    return out


# -- choosing and writing frames -------------------------------------------------


def _interesting(c: Captured) -> bool:
    """Prefer frames that carry the values under test over bootstrap/empty ones."""
    req = parse_request(c.frame)
    assert not isinstance(req, BadRequest)
    body = req.body
    if c.api_key == METADATA:
        return bool(body.topics) and any(t.name == TOPIC for t in body.topics)
    if c.api_key == FETCH:
        return any(t.partitions for t in body.topics)
    if c.api_key == OFFSET_FETCH:
        if c.api_version >= 8:
            return any(g.topics for g in body.groups)
        return bool(body.topics)
    if c.api_key == SYNC_GROUP:
        # kafka-python's leader may first assign before its metadata names the topic.
        return any(_assigned_partitions(a.assignment) for a in body.assignments)
    return True


def _assigned_partitions(assignment: bytes) -> int:
    """How many partitions a consumer-protocol assignment (version-prefixed) names."""
    if len(assignment) < 2:
        return 0
    version = int.from_bytes(assignment[:2], "big", signed=True)
    value, _ = ConsumerProtocolAssignment.decode_from(assignment, 2, min(version, 3))
    return sum(len(tp.partitions) for tp in value.assigned_partitions)


def select(captured: list[tuple[Run, list[Captured]]]) -> list[tuple[Run, Captured]]:
    """One frame per (client, API, version), and per codec for Produce; see the docstring."""
    chosen: dict[tuple[str, int, int, str | None], tuple[Run, Captured, bool]] = {}
    for run, frames in captured:
        for c in frames:
            codec = run.codec if c.api_key == PRODUCE else None
            key = (run.client, c.api_key, c.api_version, codec)
            interesting = _interesting(c)
            if key not in chosen or (interesting and not chosen[key][2]):
                chosen[key] = (run, c, interesting)
    return [(run, c) for run, c, _ in chosen.values()]


def write(out: Path, selected: list[tuple[Run, Captured]]) -> dict[str, Any]:
    """Write the frame files; return the manifest (runs with their expectations, frames)."""
    counters: dict[tuple[str, str, int], int] = {}
    runs_json: dict[str, Any] = {}
    frames_json = []
    order = {(run.client, run.name): i for i, run in enumerate(runs())}
    for run, c in sorted(
        selected, key=lambda rc: (rc[1].api_key, rc[1].api_version, order[rc[0].client, rc[0].name])
    ):
        name = api.api_name(c.api_key)
        n = counters.get((run.client, name, c.api_version), 0)
        counters[(run.client, name, c.api_version)] = n + 1
        rel = f"{run.client}/{name}-v{c.api_version}-{n}.bin"
        (out / run.client).mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(c.frame)
        run_id = f"{run.client}/{run.name}"
        runs_json[run_id] = {"client": run.client, "client_id": run.client_id, **run.expect}
        frame = {"file": rel, "run": run_id, "api": name, "version": c.api_version}
        frames_json.append({**frame, "api_key": c.api_key})
    return {
        "generated_by": "python -m tools.capture_frames --out tests/golden",
        "clients": _client_versions(),
        "advertised": {api.api_name(k): list(v) for k, v in sorted(ADVERTISED.items())},
        "runs": dict(sorted(runs_json.items())),
        "frames": frames_json,
    }


def _manifest_text(manifest: dict[str, Any]) -> str:
    """JSON with one line per frame entry, so diffs of a re-capture stay readable."""
    head = json.dumps({k: v for k, v in manifest.items() if k != "frames"}, indent=1)
    frames = ",\n".join(f"  {json.dumps(f)}" for f in manifest["frames"])
    return f'{head[:-2]},\n "frames": [\n{frames}\n ]\n}}\n'


def _client_versions() -> dict[str, str]:
    import aiokafka
    import confluent_kafka
    import kafka

    return {
        "confluent-kafka": f"{confluent_kafka.__version__} "
        f"(librdkafka {confluent_kafka.libversion()[0]})",
        "kafka-python": str(kafka.__version__),
        "aiokafka": str(aiokafka.__version__),
    }


async def capture_all() -> list[tuple[Run, list[Captured]]]:
    captured = []
    for run in runs():
        async with FakeBroker() as broker:
            print(f"{run.client} {run.name} on {broker.bootstrap}", file=sys.stderr)
            try:
                await asyncio.wait_for(run.drive(broker, run), RUN_DEADLINE_S * 2)
            finally:
                for error in broker.errors:
                    print(f"  fake broker: {error}", file=sys.stderr)
        if broker.errors:
            raise RuntimeError(f"{run.client} {run.name}: the fake broker failed")
        frames = broker.frames()
        summary = sorted({(api.api_name(c.api_key), c.api_version) for c in frames})
        print(f"  {len(frames)} frames: {summary}", file=sys.stderr)
        captured.append((run, frames))
    return captured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="e.g. tests/golden")
    args = parser.parse_args(argv)
    captured = asyncio.run(capture_all())
    out: Path = args.out
    for client in {run.client for run, _ in captured}:
        shutil.rmtree(out / client, ignore_errors=True)
    manifest = write(out, select(captured))
    (out / "manifest.json").write_text(_manifest_text(manifest))
    total = sum((out / e["file"]).stat().st_size for e in manifest["frames"])
    print(f"wrote {len(manifest['frames'])} frames, {total} bytes, to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

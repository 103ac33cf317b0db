"""Capture request frames from real Kafka clients for the golden-frame tests.

Re-run (about a minute; needs confluent-kafka, kafka-python and aiokafka)::

    python -m tools.capture_frames --out tests/golden

then review and commit ``tests/golden``. CI does not run this tool; it runs
``tests/unit/test_golden_frames.py`` over the committed frames. ``--only
confluent-kafka`` (a client) or ``--only confluent-kafka/consumer`` (a run)
captures part of the set; ``--bootstrap HOST:PORT`` uses a broker of yours.

How it works. Each *run* (one client doing one thing) talks to a real Odradek
broker (a fresh in-process :class:`odradek.testing.broker.Broker` per run, so
no run sees another's records or commits) through a :class:`RecordingProxy`:
a small asyncio TCP proxy on 127.0.0.1, on an ephemeral port, that forwards
every byte both ways and records each request frame (as bytes without the
size prefix) with the answer the client got. Kafka answers carry broker
addresses, so the proxy rewrites the host and port of every broker in
Metadata and DescribeCluster answers and of the coordinator in FindCoordinator
answers to a listener of its own that forwards to that broker (one listener
per broker, opened on first sight): the client never leaves the proxy.
Nothing else is changed; every answer is the broker's own. No API is faked:
the broker serves every API these clients send (the fake broker this tool
used to be answered ApiVersions, Metadata, Produce, Fetch, ListOffsets,
FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, InitProducerId and CreateTopics, all of which the broker now
serves at the versions it advertised, research §1.6).

A request frame that does not parse, a broker that cannot be reached or an
answer that cannot be rewritten is recorded as an error and fails the run.

With ``--bootstrap`` every run talks to that broker instead, with the topic
and group names suffixed by a random token per run (again so that no run sees
another's records or commits); the broker must allow creating the topic.

Runs: confluent-kafka (librdkafka) producers, one per codec in :data:`CODECS`,
idempotent; a confluent-kafka consumer in a group; kafka-python's
KafkaProducer (idempotent by default) and KafkaConsumer; aiokafka's producer
(idempotent, gzip) and consumer. Before each run the topic is created with
:data:`PARTITIONS` partitions. Producers send :data:`RECORDS` (fixed keys,
values, headers and timestamps) to partition 0; consumers subscribe to the
topic in the group, wait for an answered Fetch and Heartbeat, commit offset
:data:`COMMIT_OFFSET` with metadata :data:`COMMIT_METADATA` on partition 0,
and close (LeaveGroup). Waits poll the client with a deadline.

Output: ``<out>/<client>/<ApiName>-v<version>-<n>.bin``, one frame per
(client, API, version), and for Produce one per codec; ``n`` numbers the files
sharing a (client, API, version). Where a client sends several frames of one
(API, version), the first "interesting" one is kept (Metadata naming the
topic, Fetch and OffsetFetch naming partitions, SyncGroup assigning some),
and among those the first one answered.
With ``--answers`` the broker's answer to each kept frame is written beside
it as ``<ApiName>-v<version>-<n>.answer.bin`` (size prefix removed, addresses
as the client saw them) and named in its manifest entry under ``"answer"``.
``<out>/manifest.json`` lists every file with the values its run was
configured with, never values read back from the request frames: the client
settings and records, and what the broker told the client (the producer id
and epoch from InitProducerId, the member id and generation from the first
successful JoinGroup, the topic id from Metadata), which the tests check the
decoded frames against;
``advertised`` is the broker's ApiVersions answer.

Determinism: the values are fixed, so a re-capture decodes to the same
requests; its bytes may still differ in correlation ids, the order in which a
client lists partitions, the timestamp in aiokafka's gzip header, and the
member ids the broker assigns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import shutil
import struct
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from odradek.wire import api
from odradek.wire.frames import BadRequest, encode_response, parse_request
from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from odradek.wire.messages.response_header import ResponseHeader
from odradek.wire.primitives import DecodeError
from odradek.wire.schema import Message

PRODUCE, FETCH, METADATA = 0, 1, 3
OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 9, 10, 11
HEARTBEAT, SYNC_GROUP, API_VERSIONS, INIT_PRODUCER_ID = 12, 14, 18, 22
DESCRIBE_CLUSTER = 60
ADDRESS_ANSWERS: Final = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
"""APIs whose answers name brokers by host and port: the proxy rewrites those."""

HOST: Final = "127.0.0.1"
_SIZE: Final = struct.Struct(">i")
_KEY_VERSION_CORR: Final = struct.Struct(">hhi")

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
    """One record every producer run sends, as configured (and as the manifest lists it)."""

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


# -- the recording proxy ---------------------------------------------------------


@dataclass
class Captured:
    """One request frame a client sent (no size prefix) and the answer it got, if any yet.

    ``answer`` is the response frame without its size prefix, as the client
    received it (addresses rewritten); None for a request with no answer
    (Produce with acks=0) or one the connection closed before answering.
    """

    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes
    answer: bytes | None = None


def decode_answer(c: Captured) -> Message | None:
    """The body of ``c.answer`` at the request's version; None if absent or undecodable
    (an ApiVersions answer with error 35 has a v0 body, whatever version was asked)."""
    if c.answer is None:
        return None
    try:
        header_version = api.response_header_version(c.api_key, c.api_version)
        _, pos = ResponseHeader.decode_from(c.answer, 0, header_version)
        body, _ = api.response_class(c.api_key).decode_from(c.answer, pos, c.api_version)
    except (DecodeError, ValueError, IndexError, struct.error):
        return None
    return body


def _addressed(body: Any, api_key: int) -> list[Any]:
    """The structs of an answer that carry a broker's ``host`` and ``port``."""
    if api_key in (METADATA, DESCRIBE_CLUSTER):
        return list(body.brokers)
    if api_key == FIND_COORDINATOR:
        return [*body.coordinators, body]  # v4+ lists coordinators; v0-3 has one inline
    return []


class RecordingProxy:
    """A recording TCP proxy in front of a Kafka broker; see the module docstring.

    ``async with RecordingProxy("127.0.0.1:9092") as proxy:`` gives clients
    ``proxy.bootstrap``; :meth:`frames` is what they sent so far, in arrival
    order, and ``errors`` what went wrong.
    """

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.port = 0
        self.errors: list[str] = []
        self._frames: list[Captured] = []
        self._frames_lock = threading.Lock()  # saw() is called from client threads
        self._listeners: dict[tuple[str, int], tuple[asyncio.Server, int]] = {}
        self._listen_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def frames(self) -> list[Captured]:
        """Every request frame recorded so far (with its answer once it arrived)."""
        with self._frames_lock:
            return list(self._frames)

    def saw(self, *api_keys: int) -> bool:
        """True once at least one request of each of ``api_keys`` has been answered."""
        with self._frames_lock:
            seen = {c.api_key for c in self._frames if c.answer is not None}
        return set(api_keys) <= seen

    async def __aenter__(self) -> RecordingProxy:
        self.port = await self._listen(self.upstream)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for server, _ in self._listeners.values():
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server, _ in self._listeners.values():
            await server.wait_closed()

    async def _listen(self, broker: tuple[str, int]) -> int:
        """The local port forwarding to ``broker``, opening a listener on first use."""
        async with self._listen_lock:
            if broker not in self._listeners:

                async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                    # Closing the proxy cancels open connections; end quietly (asyncio's
                    # start_server would log a cancelled handler as an error).
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._serve(broker, r, w)

                server = await asyncio.start_server(serve, HOST, 0)
                self._listeners[broker] = (server, server.sockets[0].getsockname()[1])
            return self._listeners[broker][1]

    async def _serve(
        self, broker: tuple[str, int], client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
    ) -> None:
        """One client connection: a connection to ``broker`` and a pump each way."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        broker_w: asyncio.StreamWriter | None = None
        try:
            try:
                broker_r, broker_w = await asyncio.open_connection(*broker)
            except OSError as exc:
                self.errors.append(f"cannot reach broker {broker[0]}:{broker[1]}: {exc}")
                return
            pending: dict[int, Captured] = {}
            pumps = [
                asyncio.create_task(self._requests(client_r, broker_w, pending)),
                asyncio.create_task(self._answers(broker_r, client_w, pending)),
            ]
            try:
                # Either side hanging up ends the connection, as it would without us.
                done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                for pump in done:
                    if (failure := pump.exception()) is not None:
                        self.errors.append(f"proxy connection failed: {failure!r}")
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            for w in (client_w, broker_w):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    async def _requests(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, pending: dict[int, Captured]
    ) -> None:
        """Client to broker: record each request frame, forward it unchanged."""
        async for frame in _frames_of(src):
            req = parse_request(frame)
            if isinstance(req, BadRequest):
                self.errors.append(f"a request that does not parse: {req}")
            api_key, api_version, correlation_id = _KEY_VERSION_CORR.unpack_from(frame, 0)
            captured = Captured(api_key, api_version, correlation_id, frame)
            with self._frames_lock:
                self._frames.append(captured)
            pending[correlation_id] = captured
            dst.write(_SIZE.pack(len(frame)) + frame)
            await dst.drain()

    async def _answers(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, pending: dict[int, Captured]
    ) -> None:
        """Broker to client: rewrite broker addresses, record the answer, forward it."""
        async for frame in _frames_of(src):
            (correlation_id,) = _SIZE.unpack_from(frame, 0)
            captured = pending.pop(correlation_id, None)
            if captured is None:
                self.errors.append(f"an answer to no request (correlation id {correlation_id})")
            elif captured.api_key in ADDRESS_ANSWERS:
                frame = await self._rewrite(captured, frame)
            if captured is not None:
                captured.answer = frame
            dst.write(_SIZE.pack(len(frame)) + frame)
            await dst.drain()

    async def _rewrite(self, c: Captured, frame: bytes) -> bytes:
        """``frame`` with every broker address replaced by the proxy's listener for it."""
        body = decode_answer(Captured(c.api_key, c.api_version, c.correlation_id, c.frame, frame))
        if body is None:
            self.errors.append(f"cannot decode a {api.api_name(c.api_key)} v{c.api_version} answer")
            return frame
        for item in _addressed(body, c.api_key):
            if item.host and item.port > 0:
                item.host, item.port = HOST, await self._listen((item.host, item.port))
        parts = encode_response(c.api_key, c.api_version, c.correlation_id, body)
        return b"".join(bytes(p) for p in parts)[4:]


async def _frames_of(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """Kafka frames (int32 size, then that many bytes) without the size, until EOF."""
    while True:
        try:
            head = await reader.readexactly(4)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        (size,) = _SIZE.unpack(head)
        try:
            yield await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return


@contextlib.asynccontextmanager
async def broker_for(run: Run, bootstrap: str | None) -> AsyncIterator[str]:
    """The broker address for one run, with the run's topic created: a fresh
    in-process broker (stopped afterwards), or ``bootstrap``."""
    if bootstrap is None:
        from odradek.testing.broker import Broker

        async with Broker() as broker:
            await asyncio.to_thread(broker.create_topic, run.topic, PARTITIONS)
            yield broker.bootstrap_servers
        return
    await asyncio.to_thread(_create_topic, bootstrap, run.topic)
    yield bootstrap


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # no info chatter
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(RUN_DEADLINE_S)


# -- the runs ------------------------------------------------------------------


@dataclass
class Run:
    """One client doing one thing, through its own proxy."""

    client: str
    name: str
    drive: Callable[[RecordingProxy, Run], Awaitable[None]]
    client_id: str
    codec: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    topic: str = TOPIC
    group: str = GROUP

    @property
    def run_id(self) -> str:
        return f"{self.client}/{self.name}"


def _deadline_passed(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{what}: gave up after {RUN_DEADLINE_S} s")


def _producer_expect(run: Run, acks: int) -> None:
    run.expect.update(
        topic=run.topic,
        partition=0,
        codec=run.codec,
        acks=acks,
        records=[r.to_json() for r in RECORDS],
    )


def _consumer_expect(run: Run, isolation_level: int) -> None:
    run.expect.update(
        topic=run.topic,
        partitions=PARTITIONS,
        group_id=run.group,
        isolation_level=isolation_level,
        max_wait_ms=FETCH_WAIT_MS,
        commit={"partition": 0, "offset": COMMIT_OFFSET, "metadata": COMMIT_METADATA},
    )


def _told(run: Run, frames: list[Captured]) -> None:
    """Add to ``run.expect`` what the broker told the client: producer id and epoch
    (idempotent producers: base sequence 0), member id and generation, and the
    topic's id (Metadata v10+: Fetch v13+ names topics by id)."""
    for c in frames:
        body: Any = decode_answer(c)
        if body is None or getattr(body, "error_code", 0) != 0:
            continue
        if c.api_key == METADATA and "topic_id" not in run.expect:
            for t in body.topics:
                if t.name == run.topic and t.error_code == 0 and t.topic_id.int:
                    run.expect.update(topic_id=str(t.topic_id))
        if c.api_key == INIT_PRODUCER_ID and "producer_id" not in run.expect:
            run.expect.update(producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                              base_sequence=0)
        if c.api_key == JOIN_GROUP and "member_id" not in run.expect:
            run.expect.update(member_id=body.member_id, generation_id=body.generation_id)
    if "records" in run.expect and "producer_id" not in run.expect:  # not idempotent
        run.expect.update(producer_id=-1, producer_epoch=-1, base_sequence=-1)


async def confluent_producer(proxy: RecordingProxy, run: Run) -> None:
    await asyncio.to_thread(_confluent_producer, proxy.bootstrap, run)


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
            run.topic,
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


async def confluent_consumer(proxy: RecordingProxy, run: Run) -> None:
    await asyncio.to_thread(_confluent_consumer, proxy, run)


def _confluent_consumer(proxy: RecordingProxy, run: Run) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "client.id": run.client_id,
            "group.id": run.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "heartbeat.interval.ms": 100,
        }
    )
    try:
        consumer.subscribe([run.topic])
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not proxy.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            consumer.poll(0.1)
        tp = confluent_kafka.TopicPartition(run.topic, 0, COMMIT_OFFSET, COMMIT_METADATA)
        consumer.commit(offsets=[tp], asynchronous=False)
    finally:
        consumer.close()


async def kafka_python_producer(proxy: RecordingProxy, run: Run) -> None:
    await asyncio.to_thread(_kafka_python_producer, proxy.bootstrap, run)


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
                run.topic,
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


async def kafka_python_consumer(proxy: RecordingProxy, run: Run) -> None:
    await asyncio.to_thread(_kafka_python_consumer, proxy, run)


def _kafka_python_consumer(proxy: RecordingProxy, run: Run) -> None:
    import kafka
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = kafka.KafkaConsumer(
        run.topic,
        bootstrap_servers=proxy.bootstrap,
        client_id=run.client_id,
        group_id=run.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=FETCH_WAIT_MS,
        heartbeat_interval_ms=100,
    )
    try:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not proxy.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            consumer.poll(timeout_ms=100)
        committed = OffsetAndMetadata(COMMIT_OFFSET, COMMIT_METADATA, -1)
        offsets = {TopicPartition(run.topic, 0): committed}
        consumer.commit(offsets)
    finally:
        consumer.close()


async def aiokafka_producer(proxy: RecordingProxy, run: Run) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=proxy.bootstrap,
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
                run.topic,
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


async def aiokafka_consumer(proxy: RecordingProxy, run: Run) -> None:
    import aiokafka
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    consumer = aiokafka.AIOKafkaConsumer(
        run.topic,
        bootstrap_servers=proxy.bootstrap,
        client_id=run.client_id,
        group_id=run.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=FETCH_WAIT_MS,
        heartbeat_interval_ms=100,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not proxy.saw(FETCH, HEARTBEAT):
            _deadline_passed(deadline, run.name)
            await consumer.getmany(timeout_ms=100)
        await consumer.commit(
            {TopicPartition(run.topic, 0): OffsetAndMetadata(COMMIT_OFFSET, COMMIT_METADATA)}
        )
    finally:
        await consumer.stop()


def runs() -> list[Run]:
    out: list[Run] = []
    for codec in CODECS:
        run = Run("confluent-kafka", f"producer-{codec}", confluent_producer,
                  f"golden-ck-producer-{codec}", codec)
        _producer_expect(run, acks=-1)
        out.append(run)
    run = Run("confluent-kafka", "consumer", confluent_consumer, "golden-ck-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    run = Run("kafka-python", "producer-none", kafka_python_producer,
              "golden-kp-producer", "none")
    _producer_expect(run, acks=-1)
    out.append(run)
    run = Run("kafka-python", "consumer", kafka_python_consumer, "golden-kp-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    run = Run("aiokafka", "producer-gzip", aiokafka_producer, "golden-aio-producer", "gzip")
    _producer_expect(run, acks=-1)
    out.append(run)
    run = Run("aiokafka", "consumer", aiokafka_consumer, "golden-aio-consumer")
    _consumer_expect(run, isolation_level=1)
    out.append(run)
    return out


# -- choosing and writing frames -------------------------------------------------


# -- choosing and writing frames -------------------------------------------------


def _interesting(run: Run, c: Captured) -> bool:
    """Prefer frames that carry the values under test over bootstrap/empty ones."""
    req = parse_request(c.frame)
    assert not isinstance(req, BadRequest)
    body = req.body
    if c.api_key == METADATA:
        return bool(body.topics) and any(t.name == run.topic for t in body.topics)
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
    chosen: dict[tuple[str, int, int, str | None], tuple[Run, Captured, tuple[bool, bool]]] = {}
    for run, frames in captured:
        for c in frames:
            codec = run.codec if c.api_key == PRODUCE else None
            key = (run.client, c.api_key, c.api_version, codec)
            # Interesting first, then answered (a client drops its bootstrap
            # connection, and closes, with requests unanswered).
            rank = (_interesting(run, c), c.answer is not None)
            if key not in chosen or rank > chosen[key][2]:
                chosen[key] = (run, c, rank)
    return [(run, c) for run, c, _ in chosen.values()]


def _advertised(captured: list[tuple[Run, list[Captured]]]) -> dict[str, list[int]]:
    """The broker's ApiVersions answer (the first successful one), by API name."""
    for _, frames in captured:
        for c in frames:
            body: Any = decode_answer(c) if c.api_key == API_VERSIONS else None
            if body is not None and body.error_code == 0:
                return {
                    api.api_name(k.api_key): [k.min_version, k.max_version]
                    for k in sorted(body.api_keys, key=lambda k: k.api_key)
                    if api.is_known(k.api_key)
                }
    return {}


def write(
    out: Path,
    selected: list[tuple[Run, Captured]],
    advertised: dict[str, list[int]],
    answers: bool = False,
) -> dict[str, Any]:
    """Write the frame files (and with ``answers`` the answer files); return the
    manifest (runs with their expectations, frames)."""
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
        runs_json[run.run_id] = {"client": run.client, "client_id": run.client_id, **run.expect}
        frame: dict[str, Any] = {"file": rel, "run": run.run_id, "api": name,
                                 "version": c.api_version, "api_key": c.api_key}
        if answers and c.answer is not None:
            answer_rel = rel.removesuffix(".bin") + ".answer.bin"
            (out / answer_rel).write_bytes(c.answer)
            frame["answer"] = answer_rel
        frames_json.append(frame)
    return {
        "generated_by": "python -m tools.capture_frames --out tests/golden",
        "clients": _client_versions(),
        "advertised": advertised,
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


def chosen_runs(only: list[str]) -> list[Run]:
    """The runs ``--only`` names (a client, or client/run); all when empty."""
    every = runs()
    if not only:
        return every
    picked = [r for r in every if r.client in only or r.run_id in only]
    unknown = set(only) - {r.client for r in every} - {r.run_id for r in every}
    if unknown:
        names = ", ".join(sorted({r.client for r in every} | {r.run_id for r in every}))
        raise SystemExit(f"--only: unknown {', '.join(sorted(unknown))}; choose from {names}")
    return picked


async def capture_all(
    chosen: list[Run], bootstrap: str | None = None
) -> list[tuple[Run, list[Captured]]]:
    """Drive each run through its own proxy; the frames each one recorded."""
    captured = []
    for run in chosen:
        if bootstrap is not None:
            token = secrets.token_hex(4)
            run.topic, run.group = f"{TOPIC}-{token}", f"{GROUP}-{token}"
            for key, value in (("topic", run.topic), ("group_id", run.group)):
                if key in run.expect:
                    run.expect[key] = value
        async with broker_for(run, bootstrap) as upstream, RecordingProxy(upstream) as proxy:
            print(f"{run.run_id} on {proxy.bootstrap} -> {upstream}", file=sys.stderr)
            await asyncio.wait_for(run.drive(proxy, run), RUN_DEADLINE_S * 2)
        for error in proxy.errors:
            print(f"  proxy: {error}", file=sys.stderr)
        if proxy.errors:
            raise RuntimeError(f"{run.run_id}: the recording proxy failed")
        frames = proxy.frames()
        _told(run, frames)
        summary = sorted({(api.api_name(c.api_key), c.api_version) for c in frames})
        print(f"  {len(frames)} frames: {summary}", file=sys.stderr)
        captured.append((run, frames))
    return captured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.capture_frames",
        description=(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--out", type=Path, required=True, help="e.g. tests/golden")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="a running broker to record against (default: a fresh "
                        "in-process odradek broker per run)")
    parser.add_argument("--only", action="append", default=[], metavar="CLIENT[/RUN]",
                        help="capture only these clients or runs (repeatable), e.g. "
                        "confluent-kafka or confluent-kafka/producer-none")
    parser.add_argument("--answers", action="store_true",
                        help="also write each kept frame's answer (<name>.answer.bin)")
    args = parser.parse_args(argv)
    captured = asyncio.run(capture_all(chosen_runs(args.only), args.bootstrap))
    out: Path = args.out
    for client in {run.client for run, _ in captured}:
        shutil.rmtree(out / client, ignore_errors=True)
    manifest = write(out, select(captured), _advertised(captured), args.answers)
    (out / "manifest.json").write_text(_manifest_text(manifest))
    total = sum((out / e["file"]).stat().st_size for e in manifest["frames"])
    print(f"wrote {len(manifest['frames'])} frames, {total} bytes, to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

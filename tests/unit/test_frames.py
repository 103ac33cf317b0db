"""Sans-IO framing (``odradek.wire.frames``) and the codec's version guards.

``ServerConnection`` is driven the way asyncio's ``BufferedProtocol`` drives it
(``get_buffer`` then ``buffer_updated``) and through ``receive_data``; requests
must come out whole and in order however the stream is cut, hostile size
prefixes must fail before memory is spent, large frames must be received into
their own buffer and decoded without a copy, and a bad frame must become a
``BadRequest`` that leaves the connection usable.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.wire import api, frames
from odradek.wire.codec import INLINE_RECORDS_MAX
from odradek.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    DIRECT_FRAME_BYTES,
    SCRATCH_BYTES,
    BadRequest,
    ClientConnection,
    FrameError,
    Request,
    ServerConnection,
    encode_request,
    encode_response,
    parse_request,
)
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from odradek.wire.messages.controlled_shutdown_request import ControlledShutdownRequest
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.metadata_response import MetadataResponse, MetadataResponseBroker
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.primitives import DecodeError, EncodeError, uvarint_bytes
from odradek.wire.schema import Message

Event = Request | BadRequest


def produce(records: bytes, partitions: int = 1, transactional_id: str | None = None) -> Any:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name="orders",
                partition_data=[
                    PartitionProduceData(index=i, records=records) for i in range(partitions)
                ],
            )
        ],
    )


# (api version, correlation id, body): one of each header version and shape.
SAMPLES: list[tuple[int, int, Message]] = [
    (3, 7, ApiVersionsRequest(client_software_name="odradek-test", client_software_version="1")),
    (0, 8, ApiVersionsRequest()),
    (1, 9, MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in "ab"])),
    (12, 10, MetadataRequest(topics=None, include_topic_authorized_operations=True)),
    (9, 11, produce(b"\x01\x02records", partitions=3)),
    (3, 12, produce(b"legacy-ish", transactional_id="tx")),
    (0, 13, ControlledShutdownRequest(broker_id=4)),  # header v0: no client id
]


def sample_frames() -> list[bytes]:
    return [encode_request(body.API_KEY, v, corr, body) for v, corr, body in SAMPLES]


def assert_matches_samples(events: Sequence[Event | None]) -> None:
    assert len(events) == len(SAMPLES)
    for event, (version, corr, body) in zip(events, SAMPLES, strict=True):
        assert isinstance(event, Request), event
        assert (event.api_key, event.api_version, event.correlation_id) == (
            body.API_KEY,
            version,
            corr,
        )
        assert event.body == body


def drain(conn: ServerConnection) -> list[Event]:
    out: list[Event] = []
    while (event := conn.next_event()) is not None:
        out.append(event)
    return out


def feed_like_a_socket(
    conn: ServerConnection, data: bytes | memoryview, chunks: Iterable[int]
) -> None:
    """Write into ``get_buffer()`` as a transport would, at most ``chunk`` bytes per read."""
    pos = 0
    sizes = iter(chunks)
    while pos < len(data):
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), next(sizes), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        conn.buffer_updated(n)
        pos += n


def raw_frame(api_key: int, version: int, corr: int, rest: bytes = b"") -> bytes:
    """A frame with a hand-made header start: key, version, correlation id, then ``rest``."""
    body = struct.pack(">hhi", api_key, version, corr) + rest
    return struct.pack(">i", len(body)) + body


CLIENT_ID = struct.pack(">h", 4) + b"test"


# -- splitting and coalescing ----------------------------------------------------


def test_every_split_point_yields_the_same_requests_in_order() -> None:
    stream = b"".join(sample_frames())
    for cut in range(len(stream) + 1):
        conn = ServerConnection()
        conn.receive_data(stream[:cut])
        events = drain(conn)
        conn.receive_data(stream[cut:])
        events += drain(conn)
        assert_matches_samples(events)


def test_one_byte_at_a_time_through_get_buffer() -> None:
    frames_ = sample_frames()
    conn = ServerConnection()
    events: list[Event] = []
    for frame in frames_:
        for i in range(len(frame)):
            assert conn.next_event() is None
            feed_like_a_socket(conn, frame[i : i + 1], [1])
        events += drain(conn)
        assert len(events) == len(frames_[: len(events)])
    assert_matches_samples(events)


def test_many_requests_coalesced_in_one_chunk() -> None:
    stream = b"".join(sample_frames()) * 3
    conn = ServerConnection()
    conn.receive_data(stream)
    assert conn.buffered_frames == 3 * len(SAMPLES)
    events = drain(conn)
    assert conn.next_event() is None
    for i in range(3):
        assert_matches_samples(events[i * len(SAMPLES) : (i + 1) * len(SAMPLES)])


BIG_A = bytes(range(256)) * 160  # 40 KiB: above DIRECT_FRAME_BYTES, below the scratch size
BIG_B = b"\x5a" * (SCRATCH_BYTES + 1000)  # larger than the scratch buffer itself
MIXED = [
    (ApiVersionsRequest(), 0),
    (produce(BIG_A), 9),
    (MetadataRequest(topics=[MetadataRequestTopic(name="x")]), 4),
    (produce(BIG_B), 7),
    (produce(BIG_A, partitions=2), 3),
    (ApiVersionsRequest(client_software_name="n", client_software_version="v"), 3),
]
MIXED_STREAM = b"".join(
    encode_request(body.API_KEY, v, corr, body) for corr, (body, v) in enumerate(MIXED)
)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.integers(1, 70_000), min_size=1, max_size=30))
def test_any_chunking_of_small_and_large_frames(chunks: list[int]) -> None:
    conn = ServerConnection()
    sizes = iter([*chunks, *[len(MIXED_STREAM)] * len(MIXED_STREAM)])
    feed_like_a_socket(conn, MIXED_STREAM, sizes)
    events = drain(conn)
    assert [e.correlation_id for e in events] == list(range(len(MIXED)))
    for event, (body, version) in zip(events, MIXED, strict=True):
        assert isinstance(event, Request)
        assert event.api_version == version
        assert event.body == body


# -- hostile size prefixes -----------------------------------------------------------


@pytest.mark.parametrize(
    "claimed",
    [DEFAULT_MAX_FRAME_BYTES + 1, 2**31 - 1, -1, -(2**31), -(2**31) + 5],
    ids=["limit+1", "2GiB-1", "-1", "-2GiB", "negative-large"],
)
def test_hostile_size_prefix_fails_before_allocating(claimed: int) -> None:
    conn = ServerConnection()
    junk = b"\x00" * 1024
    tracemalloc.start()
    try:
        with pytest.raises(FrameError):
            conn.receive_data(struct.pack(">i", claimed) + junk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"{peak} bytes allocated for a rejected frame"
    # The connection stays failed: the caller must close it.
    with pytest.raises(FrameError):
        conn.get_buffer(-1)
    with pytest.raises(FrameError):
        conn.receive_data(sample_frames()[0])


def test_size_prefix_split_across_reads_is_checked_when_complete() -> None:
    conn = ServerConnection()
    prefix = struct.pack(">i", 2**31 - 1)
    conn.receive_data(prefix[:3])
    with pytest.raises(FrameError):
        conn.receive_data(prefix[3:])


@pytest.mark.parametrize("limit", [100, DIRECT_FRAME_BYTES + 10, SCRATCH_BYTES * 2])
def test_configured_limit_is_inclusive(limit: int) -> None:
    header = struct.pack(">hhi", 18, 0, 1) + CLIENT_ID
    body = header + b"\x00" * (limit - len(header))
    conn = ServerConnection(max_frame_bytes=limit)
    conn.receive_data(struct.pack(">i", limit) + body)
    event = conn.next_event()
    assert event is not None and event.size == limit
    conn = ServerConnection(max_frame_bytes=limit)
    with pytest.raises(FrameError):
        conn.receive_data(struct.pack(">i", limit + 1) + body)


# -- large frames: direct receive, zero copy -------------------------------------------


def test_large_frame_is_read_into_its_own_buffer_and_records_are_not_copied() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    frame = encode_request(0, 9, 99, produce(records))
    size = len(frame) - 4
    assert size > DIRECT_FRAME_BYTES
    conn = ServerConnection()
    source = memoryview(frame)  # slices of it copy nothing inside the measured span
    tracemalloc.start()
    try:
        first = conn.get_buffer(-1)
        assert len(first) == SCRATCH_BYTES
        first[:] = source[:SCRATCH_BYTES]
        conn.buffer_updated(SCRATCH_BYTES)
        # The socket now reads straight into a buffer of exactly the frame's size.
        view = conn.get_buffer(-1)
        target = view.obj
        assert isinstance(target, bytearray) and len(target) == size
        assert len(view) == len(frame) - SCRATCH_BYTES
        feed_like_a_socket(conn, source[SCRATCH_BYTES:], [SCRATCH_BYTES] * 16)
        event = conn.next_event()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(event, Request)
    got = event.body.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview)
    assert got.obj is target
    assert got == records
    # One frame-sized buffer and nothing like a second copy of it.
    assert peak < size + size // 2, (peak, size)


def test_large_frame_after_small_ones_in_the_same_chunk() -> None:
    records = b"\x07" * (2 * SCRATCH_BYTES)
    small = sample_frames()[0]
    big = encode_request(0, 9, 5, produce(records))
    conn = ServerConnection()
    feed_like_a_socket(conn, small * 3 + big, [SCRATCH_BYTES] * 10)
    events = drain(conn)
    assert [e.correlation_id for e in events] == [7, 7, 7, 5]
    last = events[-1]
    assert isinstance(last, Request)
    got = last.body.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview) and isinstance(got.obj, bytearray)
    assert len(got.obj) == len(big) - 4


# -- bad requests --------------------------------------------------------------------


@pytest.mark.parametrize("key", [-1, 88, 999, 32767, -32768])
def test_unknown_api_key(key: int) -> None:
    assert not api.is_known(key)
    conn = ServerConnection()
    conn.receive_data(raw_frame(key, 0, 4242, CLIENT_ID + b"\x00\x01"))
    event = conn.next_event()
    assert isinstance(event, BadRequest)
    assert (event.reason, event.api_key, event.correlation_id) == ("unknown_api", key, 4242)


def test_api_versions_beyond_the_spec_is_unsupported_with_its_correlation_id() -> None:
    # What a future client sends first: ApiVersions v9, header v2, a flexible body.
    body = uvarint_bytes(4) + b"lib" + uvarint_bytes(2) + b"9" + b"\x00"
    conn = ServerConnection()
    conn.receive_data(raw_frame(18, 9, 0x0BADCAFE, CLIENT_ID + b"\x00" + body))
    event = conn.next_event()
    assert isinstance(event, BadRequest)
    assert event.reason == "unsupported_version"
    assert (event.api_key, event.api_version, event.correlation_id) == (18, 9, 0x0BADCAFE)


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        (18, 9, b"\xff\xff\xff"),  # a body in a layout we cannot know is not malformed
        (18, 5, b""),
        (0, 13, b""),  # Kafka 4.0 stops at 12 (overlay on the vendored specs)
        (0, -1, b""),
        (3, 14, b"\x00"),
        (1, 32767, b""),
    ],
)
def test_versions_outside_the_spec_are_unsupported(key: int, version: int, body: bytes) -> None:
    header = CLIENT_ID + (b"\x00" if api.request_header_version(key, version) == 2 else b"")
    event = parse_request(raw_frame(key, version, 31, header + body)[4:])
    assert isinstance(event, BadRequest)
    assert (event.reason, event.api_version, event.correlation_id) == (
        "unsupported_version",
        version,
        31,
    )


def _malformed_frames() -> list[tuple[str, bytes]]:
    metadata = encode_request(3, 1, 77, MetadataRequest(topics=[MetadataRequestTopic(name="abc")]))
    produce9 = encode_request(0, 9, 77, produce(b"x" * 50))
    bad_utf8 = metadata.replace(b"abc", b"a\xffc")

    def reframe(body: bytes) -> bytes:
        return struct.pack(">i", len(body)) + body

    return [
        ("truncated by one", reframe(metadata[4:-1])),
        ("truncated produce", reframe(produce9[4:-20])),
        ("garbage body", raw_frame(19, 3, 77, CLIENT_ID + b"\xff" * 40)),
        ("header only", raw_frame(3, 1, 77, CLIENT_ID)),
        ("client id overruns", raw_frame(3, 1, 77, struct.pack(">h", 300) + b"ab")),
        ("flexible header without tags", raw_frame(18, 3, 77, CLIENT_ID)),
        ("invalid utf-8 topic", bad_utf8),
        ("records length lies", reframe(produce9[4:].replace(uvarint_bytes(51) + b"x", b"\x7fx"))),
    ]


@pytest.mark.parametrize(("name", "frame"), _malformed_frames(), ids=lambda x: str(x)[:30])
def test_malformed_frames_keep_their_correlation_id(name: str, frame: bytes) -> None:
    conn = ServerConnection()
    conn.receive_data(frame)
    event = conn.next_event()
    assert isinstance(event, BadRequest), event
    assert event.reason == "malformed"
    assert event.correlation_id == 77
    assert event.size == len(frame) - 4


@pytest.mark.parametrize("length", range(8))
def test_frames_shorter_than_a_header_are_malformed_without_correlation_id(length: int) -> None:
    event = parse_request(b"\x00\x03\x00\x01\x00\x00\x00"[:length])
    assert isinstance(event, BadRequest)
    assert (event.reason, event.correlation_id, event.size) == ("malformed", None, length)
    if length >= 4:  # the key is reported once the key and version are both there
        assert (event.api_key, event.api_version) == (3, -1)


def test_trailing_bytes_after_a_body_are_ignored() -> None:
    frame = encode_request(18, 0, 5, ApiVersionsRequest())
    body = frame[4:] + b"extra"
    event = parse_request(body)
    assert isinstance(event, Request) and event.correlation_id == 5


def test_connection_keeps_serving_after_bad_requests() -> None:
    good = sample_frames()
    bad = [f for _, f in _malformed_frames()]
    unknown = raw_frame(500, 0, 1, CLIENT_ID)
    unsupported = raw_frame(18, 9, 2, CLIENT_ID + b"\x00")
    stream = b"".join(
        [good[0], bad[0], good[1], unknown, good[2], unsupported, *good[3:], *bad[1:]]
    )
    for chunk in (len(stream), 1, 13):
        conn = ServerConnection()
        conn.receive_data(b"")
        feed_like_a_socket(conn, stream, [chunk] * len(stream))
        events = drain(conn)
        kinds = [e.reason if isinstance(e, BadRequest) else "ok" for e in events]
        assert kinds == [
            "ok", "malformed", "ok", "unknown_api", "ok", "unsupported_version",
            *["ok"] * (len(good) - 3), *["malformed"] * (len(bad) - 1),
        ]
        assert_matches_samples([e for e in events if isinstance(e, Request)])


# -- encode_response -------------------------------------------------------------------


def joined(parts: list[Any]) -> bytes:
    return b"".join(bytes(p.data) if isinstance(p, FileSlice) else bytes(p) for p in parts)


def check_size_prefix(parts: list[Any]) -> int:
    total = sum(len(p) for p in parts)
    first = bytes(parts[0])
    assert struct.unpack(">i", first[:4])[0] == total - 4
    return total


API_VERSIONS_BODY = ApiVersionsResponse(
    error_code=0,
    api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4), ApiVersion(3, 0, 12)],
    throttle_time_ms=0,
)


@pytest.mark.parametrize("version", range(5))
def test_api_versions_responses_use_header_v0_at_every_version(version: int) -> None:
    parts = encode_response(18, version, 0x01020304, API_VERSIONS_BODY)
    check_size_prefix(parts)
    data = joined(parts)
    assert data[4:8] == b"\x01\x02\x03\x04"
    assert data[8:] == API_VERSIONS_BODY.encode(version)  # no tagged-field byte
    client = ClientConnection()
    client.send(ApiVersionsRequest(), version)  # correlation id 0
    client.receive_data(joined(encode_response(18, version, 0, API_VERSIONS_BODY)))
    assert client.next_response() == (0, API_VERSIONS_BODY)


METADATA_BODY = MetadataResponse(
    brokers=[MetadataResponseBroker(node_id=1, host="localhost", port=9092)],
    cluster_id="c",
    controller_id=1,
)


@pytest.mark.parametrize("version", range(13))
def test_response_header_tagged_fields_follow_flexibility(version: int) -> None:
    parts = encode_response(3, version, 17, METADATA_BODY)
    check_size_prefix(parts)
    data = joined(parts)
    assert data[4:8] == struct.pack(">i", 17)
    if version >= 9:
        assert data[8] == 0  # header v1: an empty tagged-field section
        assert data[9:] == METADATA_BODY.encode(version)
    else:
        assert data[8:] == METADATA_BODY.encode(version)


class FileSlice:
    """Stands in for a byte range of a segment file: a length, and no buffer."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def fetch_response(records: list[Any], version: int) -> Any:
    topic = FetchableTopicResponse(
        topic="orders" if version <= 12 else "",
        topic_id=uuid.UUID(int=0) if version <= 12 else uuid.UUID(int=7),
        partitions=[
            PartitionData(partition_index=i, high_watermark=10 * i, records=r)
            for i, r in enumerate(records)
        ],
    )
    return FetchResponse(throttle_time_ms=0, session_id=0, responses=[topic])


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_external_records_pass_through_uncopied(version: int) -> None:
    payloads = [b"a" * 100, b"", b"b" * 5000, b"c" * 3]
    slices = [FileSlice(p) for p in payloads]
    with pytest.raises(TypeError):
        memoryview(slices[0])  # type: ignore[arg-type]
    mixed: list[Any] = [slices[0], None, slices[1], b"inline", slices[2], slices[3]]
    plain: list[Any] = [payloads[0], None, payloads[1], b"inline", payloads[2], payloads[3]]
    parts = encode_response(1, version, 3, fetch_response(mixed, version))
    for s in slices:
        assert sum(p is s for p in parts) == 1
    positions = [i for i, p in enumerate(parts) if isinstance(p, FileSlice)]
    assert [parts[i] for i in positions] == slices
    total = check_size_prefix(parts)
    expected = joined(encode_response(1, version, 3, fetch_response(plain, version)))
    assert total == len(expected)
    assert joined(parts) == expected


def test_large_in_memory_records_are_a_separate_part() -> None:
    big = b"r" * (INLINE_RECORDS_MAX + 1)
    small = b"s" * INLINE_RECORDS_MAX
    parts = encode_response(1, 12, 3, fetch_response([small, big], 12))
    assert sum(p is big for p in parts) == 1
    assert not any(p is small for p in parts)
    check_size_prefix(parts)
    client = ClientConnection()
    client.send(FetchRequest(), 12)  # correlation id 0
    client.receive_data(joined(encode_response(1, 12, 0, fetch_response([small, big], 12))))
    response = client.next_response()
    assert response is not None
    got = response[1].responses[0].partitions
    assert [bytes(p.records) for p in got] == [small, big]


# -- the codec's version guards ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "bad", "good"),
    [
        (produce(b"r", transactional_id="tx"), 2, 3),
        (MetadataRequest(include_cluster_authorized_operations=True), 11, 10),
        (MetadataRequest(allow_auto_topic_creation=False), 3, 4),
        (FetchRequest(replica_id=3), 15, 14),
    ],
)
def test_non_ignorable_field_missing_from_the_version_raises(
    body: Message, bad: int, good: int
) -> None:
    with pytest.raises(EncodeError, match="not supported in version"):
        body.encode(bad)
    assert type(body).decode(body.encode(good), good) == body


def test_fields_at_their_default_or_ignorable_are_dropped_silently() -> None:
    assert produce(b"r").encode(2)  # transactional_id is None, its default
    fetch = FetchRequest(max_bytes=5, isolation_level=1, rack_id="r1")
    decoded = FetchRequest.decode(fetch.encode(2), 2)
    assert (decoded.max_bytes, decoded.isolation_level, decoded.rack_id) == (2**31 - 1, 0, "")


@pytest.mark.parametrize(
    ("body", "version"),
    [
        (MetadataRequest(topics=None), 0),  # nullable only from v1
        (MetadataRequest(topics=[MetadataRequestTopic(name=None)]), 9),  # from v10
        (MetadataRequest(allow_auto_topic_creation=None), 4),  # type: ignore[arg-type]
        (ProduceRequest(acks=None), 3),  # type: ignore[arg-type]
        (ProduceRequest(topic_data=[TopicProduceData(name=None)]), 9),  # type: ignore[arg-type]
        (ProduceRequest(topic_data=None), 9),  # type: ignore[arg-type]
        (ApiVersionsRequest(client_software_name=None), 3),  # type: ignore[arg-type]
        (FetchRequest(topics=[FetchTopic(topic_id=None)]), 13),  # type: ignore[arg-type]
        (FetchRequest(topics=[FetchTopic(partitions=[None])]), 12),  # type: ignore[list-item]
        (FetchRequest(replica_state=None), 15),  # type: ignore[arg-type]
    ],
)
def test_null_in_a_non_nullable_field_raises(body: Message, version: int) -> None:
    with pytest.raises(EncodeError):
        body.encode(version)


def test_values_out_of_range_raise_encode_error() -> None:
    with pytest.raises(EncodeError):
        ProduceRequest(acks=1 << 15).encode(3)
    with pytest.raises(EncodeError):
        FetchRequest(topics=[FetchTopic(partitions=[FetchPartition(fetch_offset=2**63)])]).encode(4)


def _with_tags(encoded: bytes, tags: list[tuple[int, bytes]]) -> bytes:
    """Replace an empty trailing tagged-field section with ``tags``."""
    assert encoded.endswith(b"\x00")
    section = uvarint_bytes(len(tags))
    for tag, data in tags:
        section += uvarint_bytes(tag) + uvarint_bytes(len(data)) + data
    return encoded[:-1] + section


def test_unknown_tagged_fields_are_skipped() -> None:
    body = ApiVersionsRequest(client_software_name="a", client_software_version="b")
    encoded = body.encode(3)
    tagged = _with_tags(encoded, [(0, b""), (5, b"xyz"), (600, b"\x00" * 300)])
    assert len(tagged) > len(encoded) + 300
    assert ApiVersionsRequest.decode(tagged, 3) == body


def test_unknown_tags_beside_known_ones_and_in_nested_structs() -> None:
    # MetadataRequest v12: topics[] of (uuid, compact nullable string, tags), two bools, tags.
    topic_id = uuid.UUID(int=0x1234)
    topic = topic_id.bytes + uvarint_bytes(3) + b"ab" + _with_tags(b"\x00", [(9, b"??")])
    raw = uvarint_bytes(2) + topic + b"\x01\x00" + _with_tags(b"\x00", [(1, b"")])
    expected = MetadataRequest(
        topics=[MetadataRequestTopic(topic_id=topic_id, name="ab")],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    assert MetadataRequest.decode(raw, 12) == expected
    # FetchRequest v12: known tag 0 (cluster id), unknown tags around it.
    fetch = FetchRequest(max_wait_ms=5)
    plain = fetch.encode(12)
    cluster = uvarint_bytes(3) + b"id"
    raw = _with_tags(plain, [(0, cluster), (3, b"\x01"), (77, b"")])
    decoded = FetchRequest.decode(raw, 12)
    assert decoded.cluster_id == "id" and decoded.max_wait_ms == 5
    with pytest.raises(DecodeError, match="size mismatch"):
        FetchRequest.decode(_with_tags(plain, [(0, cluster + b"!")]), 12)
    with pytest.raises(DecodeError):
        FetchRequest.decode(_with_tags(plain, [(7, b"abc")])[:-1], 12)


def test_unknown_tags_in_a_request_header() -> None:
    frame = encode_request(18, 3, 9, ApiVersionsRequest())
    # Header v2: key, version, correlation id, client id (int16 string), then tags.
    client_len = struct.unpack(">h", frame[12:14])[0]
    tags_at = 14 + client_len
    assert frame[tags_at] == 0
    body = frame[4:tags_at] + b"\x01\x04\x02hi" + frame[tags_at + 1 :]
    event = parse_request(body)
    assert isinstance(event, Request) and event.correlation_id == 9
    assert event.body == ApiVersionsRequest()


def test_parse_request_is_what_server_connection_uses() -> None:
    frame = sample_frames()[4]
    conn = ServerConnection()
    conn.receive_data(frame)
    assert conn.next_event() == frames.parse_request(frame[4:])


def test_raw_token_mode_takes_frames_as_they_are() -> None:
    """After a SaslHandshake v0 the frames that follow are raw SASL tokens; the
    switch applies to frames already buffered but not yet taken."""
    from odradek.wire.frames import RawToken
    from odradek.wire.messages.api_versions_request import ApiVersionsRequest

    conn = ServerConnection()
    request = encode_request(18, 3, 1, ApiVersionsRequest())
    conn.receive_data(struct.pack(">i", 5) + b"token" + request)
    conn.raw_tokens = True
    assert conn.next_event() == RawToken(b"token", 5)
    conn.raw_tokens = False
    event = conn.next_event()
    assert isinstance(event, Request) and event.api_key == 18

"""Bad input on the request path: ``frames.parse_request`` must never fail.

Random bytes, and valid requests of every API key (a few versions each) with
bit flips, truncations, splices, inflated length fields and swapped versions,
must come back as a ``Request`` or a ``BadRequest``: no other exception, no
hang (each case runs under a CPU-time alarm), and on a sample, no allocation
beyond ``ALLOC_PER_INPUT_BYTE`` per input byte plus a fixed slack. The long
seeded run is ``python -m tools.fuzz.wire``.
"""

from __future__ import annotations

import signal
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire import api
from odradek.wire.frames import (
    BadRequest,
    FrameError,
    Request,
    ServerConnection,
    encode_request,
    parse_request,
)
from odradek.wire.messages.api_table import APIS
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.primitives import uvarint_bytes
from odradek.wire.schema import in_range
from tests.support.strategies import message_strategy

CASE_CPU_SECONDS = 1.0
ALLOC_PER_INPUT_BYTE = 128  # the worst array of minimal elements measures ~55
ALLOC_SLACK = 16 * 1024

API_KEYS = sorted(APIS)
FUZZ_SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def parse_peak(parse: Callable[[], object], tries: int = 3) -> tuple[object, int]:
    """The least peak of traced memory over ``tries`` parses of the same frame.

    tracemalloc counts every thread's allocations, and a thread left by another
    test in this worker can allocate inside the window; parsing the same frame
    allocates the same every time, so the least of a few tries is the parser's.
    """
    least = None
    result: object = None
    for _ in range(tries):
        tracemalloc.start()
        try:
            result = parse()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        least = peak if least is None else min(least, peak)
    assert least is not None
    return result, least


class CaseTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout(f"a case used more than {CASE_CPU_SECONDS} s of CPU")


@contextmanager
def cpu_time_bound(seconds: float = CASE_CPU_SECONDS) -> Iterator[None]:
    """Interrupt a runaway case. SIGVTALRM leaves pytest-timeout's SIGALRM alone."""
    previous = signal.signal(signal.SIGVTALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def check_parse(frame: bytes) -> Request | BadRequest:
    with cpu_time_bound():
        event = parse_request(frame)
    assert isinstance(event, Request | BadRequest), event
    assert event.size == len(frame)
    if len(frame) >= 8:
        key, version, corr = struct.unpack_from(">hhi", frame)
        assert (event.api_key, event.api_version, event.correlation_id) == (key, version, corr)
    if isinstance(event, Request):
        lo, hi = api.spec_versions(event.api_key)
        assert lo <= event.api_version <= hi
        assert isinstance(event.body, api.request_class(event.api_key))
    else:
        assert event.reason in {"unknown_api", "unsupported_version", "malformed"}
        unknown = len(frame) >= 8 and not api.is_known(event.api_key)
        assert (event.reason == "unknown_api") == unknown
    return event


def fuzz_versions(api_key: int) -> list[int]:
    lo, hi = api.spec_versions(api_key)
    chosen = {lo, hi}
    flexible = APIS[api_key][4]
    if flexible is not None and lo <= flexible[0] <= hi:
        chosen |= {flexible[0], max(lo, flexible[0] - 1)}
    return sorted(chosen)


DONORS = [
    encode_request(0, 9, 1, ProduceRequest(acks=1, topic_data=[TopicProduceData(
        name="t", partition_data=[PartitionProduceData(index=0, records=b"\x00" * 20)])]))[4:],
    encode_request(1, 4, 2, FetchRequest(topics=[FetchTopic(
        topic="t", partitions=[FetchPartition(partition=1, fetch_offset=5)])]))[4:],
    encode_request(3, 12, 3, MetadataRequest(topics=[MetadataRequestTopic(name="t")]))[4:],
]
INFLATED = [
    struct.pack(">h", 0x7FFF),
    struct.pack(">h", -2),
    struct.pack(">i", 0x7FFFFFFF),
    struct.pack(">i", -(2**31)),
    struct.pack(">i", 0x00100000),
    uvarint_bytes(2**32 - 1),
    uvarint_bytes(2**20),
    b"\xff" * 11,  # a varint that never ends
]


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> bytes:
    out = bytearray(frame)
    for _ in range(draw(st.integers(1, 4), label="mutations")):
        op = draw(st.sampled_from(
            ["flip", "truncate", "delete", "insert", "splice", "inflate", "repeat", "version"]
        ))
        at = draw(st.integers(0, len(out)), label="at")
        if op == "flip" and at < len(out):
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del out[at:]
        elif op == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        elif op == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "splice":
            donor = draw(st.sampled_from([*DONORS, frame]))
            start = draw(st.integers(0, len(donor)))
            out[at:at] = donor[start : start + draw(st.integers(1, 48))]
        elif op == "inflate":
            raw = draw(st.sampled_from(INFLATED))
            out[at : at + len(raw)] = raw
        elif op == "repeat":
            span = bytes(out[at : at + draw(st.integers(1, 32))])
            out[at:at] = span * draw(st.sampled_from([2, 3, 100]))
        elif op == "version" and len(out) >= 4:
            lo, hi = api.spec_versions(frame_key(frame))
            struct.pack_into(">h", out, 2, draw(st.integers(lo - 1, hi + 1)))
    return bytes(out)


def frame_key(frame: bytes) -> int:
    key: int = struct.unpack_from(">h", frame)[0]
    return key


@st.composite
def valid_request(draw: st.DrawFn, api_key: int) -> tuple[bytes, Any]:
    version = draw(st.sampled_from(fuzz_versions(api_key)), label="version")
    body = draw(message_strategy(api.request_class(api_key), version), label="body")
    client_id = draw(st.none() | st.text(max_size=8), label="client id")
    corr = draw(st.integers(-(2**31), 2**31 - 1), label="correlation id")
    return encode_request(api_key, version, corr, body, client_id)[4:], body


# -- random input ------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(frame=st.binary(max_size=300))
def test_random_bytes(frame: bytes) -> None:
    check_parse(frame)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(API_KEYS),
    data=st.data(),
    body=st.binary(max_size=300),
)
def test_random_bodies_after_a_valid_header(key: int, data: Any, body: bytes) -> None:
    lo, hi = api.spec_versions(key)
    version = data.draw(st.integers(lo, hi))
    header = struct.pack(">hhi", key, version, 77)
    header_version = api.request_header_version(key, version)
    if header_version >= 1:
        header += struct.pack(">h", 2) + b"id"
    if header_version == 2:
        header += b"\x00"
    event = check_parse(header + body)
    assert not (isinstance(event, BadRequest) and event.reason != "malformed")


# -- mutations of valid requests -------------------------------------------------------


@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: api.api_name(k))
@FUZZ_SETTINGS
@given(data=st.data())
def test_mutated_requests(api_key: int, data: Any) -> None:
    frame, body = data.draw(valid_request(api_key), label="request")
    event = check_parse(frame)
    assert isinstance(event, Request) and event.body == body
    check_parse(data.draw(mutated(frame), label="mutated"))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_allocation_stays_proportional_to_the_input(data: Any) -> None:
    api_key = data.draw(st.sampled_from(API_KEYS), label="api key")
    frame, _ = data.draw(valid_request(api_key), label="request")
    frame = data.draw(mutated(frame), label="mutated")
    # Compile the codecs (and import what error paths need) first: the bound is
    # about parsing, not one-time set-up (a first call once allocated 34 kB).
    check_parse(frame)
    _, peak = parse_peak(lambda: check_parse(frame))
    assert peak <= ALLOC_PER_INPUT_BYTE * len(frame) + ALLOC_SLACK, (peak, len(frame))


def test_arrays_of_minimal_elements_stay_within_the_allocation_bound() -> None:
    """The densest input: every top-level array of every request, 400 default elements."""
    count = 400
    worst = (0.0, "")
    for key in API_KEYS:
        cls = api.request_class(key)
        lo, hi = api.spec_versions(key)
        for version in range(lo, hi + 1):
            for f in cls.FIELDS:
                if not f.array or not in_range(version, f.versions):
                    continue
                if f.kind == "struct":
                    assert f.struct is not None
                    elements: list[Any] = [f.struct() for _ in range(count)]
                elif f.kind in ("int8", "int16", "int32", "int64"):
                    elements = [0] * count
                elif f.kind == "string":
                    elements = [""] * count
                else:
                    continue
                frame = encode_request(key, version, 1, cls(**{f.name: elements}), None)[4:]
                assert isinstance(parse_request(frame), Request)
                _, peak = parse_peak(partial(parse_request, frame))
                worst = max(worst, (peak / len(frame), f"{cls.__name__} v{version} {f.name}"))
                assert peak <= ALLOC_PER_INPUT_BYTE * len(frame) + ALLOC_SLACK, worst
    assert worst[0] > 10  # the scan did measure real arrays


@pytest.mark.parametrize(
    ("key", "version", "field_bytes"),
    [
        (3, 1, struct.pack(">i", 2**31 - 1)),  # Metadata topics count
        (3, 9, uvarint_bytes(2**32 - 1)),  # compact count
        (0, 3, b"\xff\xff" + struct.pack(">hi", 1, 1) + struct.pack(">i", 2**30)),
        (0, 9, b"\x00" + struct.pack(">hi", 1, 1) + uvarint_bytes(2**31)),
    ],
)
def test_huge_counts_are_rejected_without_allocating(
    key: int, version: int, field_bytes: bytes
) -> None:
    header = struct.pack(">hhi", key, version, 5) + struct.pack(">h", -1)
    if api.request_header_version(key, version) == 2:
        header += b"\x00"
    frame = header + field_bytes + b"\x00" * 16
    parse_request(frame)
    event, peak = parse_peak(lambda: check_parse(frame))
    assert isinstance(event, BadRequest) and event.reason == "malformed"
    assert peak < 16 * 1024


# -- the same through a connection -----------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    frames=st.lists(st.binary(max_size=64), max_size=5),
    lie=st.none() | st.integers(-(2**31), 2**31 - 1),
    chunk=st.integers(1, 100),
)
def test_streams_of_bad_frames_through_a_connection(
    frames: list[bytes], lie: int | None, chunk: int
) -> None:
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    if lie is not None:
        stream += struct.pack(">i", lie)
    conn = ServerConnection(max_frame_bytes=1 << 16)
    failed = False
    with cpu_time_bound():
        try:
            for at in range(0, len(stream), chunk):
                conn.receive_data(stream[at : at + chunk])
        except FrameError:
            failed = True
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    # A lie of 0 is an empty frame; a lie within the limit waits for its bytes.
    assert [e.size for e in events] == [len(f) for f in frames] + ([0] if lie == 0 else [])
    assert failed == (lie is not None and not 0 <= lie <= 1 << 16)

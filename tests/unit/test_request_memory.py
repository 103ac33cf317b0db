"""Request memory follows received bytes (``odradek.wire.frames.RequestMemory``).

An announced frame size must cost nothing until its bytes arrive; every byte
charged must come back when the requests are released or the connection is
closed, however the stream is cut; eager (whole-buffer) allocation must stay
within its broker-wide budget.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.wire.frames import (
    DIRECT_FRAME_BYTES,
    GROW_FIRST_BYTES,
    Request,
    RequestMemory,
    ServerConnection,
    encode_request,
)
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)


def produce_frame(corr: int, nbytes: int) -> bytes:
    body = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="t", partition_data=[
            PartitionProduceData(index=0, records=bytes([corr % 251]) * nbytes)])])
    return encode_request(0, 9, corr, body)


def feed(conn: ServerConnection, data: bytes, chunk: int) -> None:
    pos = 0
    while pos < len(data):
        buf = conn.get_buffer(-1)
        n = min(len(buf), chunk, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        conn.buffer_updated(n)
        pos += n


def test_an_announced_100mb_frame_costs_what_was_sent() -> None:
    memory = RequestMemory()
    conn = ServerConnection(memory=memory)
    feed(conn, struct.pack(">i", 100_000_000) + b"x" * 1024, 65_536)
    assert conn.next_event() is None
    assert memory.used == GROW_FIRST_BYTES  # not 100 MB
    assert memory.partial == memory.used and memory.eager_unfilled == 0
    feed(conn, b"y" * 3 * GROW_FIRST_BYTES, 65_536)
    # The buffer doubles only as bytes arrive: never more than twice what was received.
    assert memory.used <= 2 * (1024 + 3 * GROW_FIRST_BYTES)
    conn.close()
    assert (memory.used, memory.partial, memory.eager_unfilled) == (0, 0, 0)


def test_growing_frame_decodes_the_same_as_a_whole_one() -> None:
    memory = RequestMemory(eager_frame_bytes=0)  # force the growing path
    frame = produce_frame(5, 3 * 1024 * 1024 + 17)
    conn = ServerConnection(memory=memory)
    feed(conn, frame, 100_000)
    event = conn.next_event()
    assert isinstance(event, Request)
    records = event.body.topic_data[0].partition_data[0].records
    assert bytes(records) == bytes([5]) * (3 * 1024 * 1024 + 17)
    assert records.obj is not None and len(records.obj) == event.size  # exact final buffer
    assert memory.used == event.size and memory.partial == 0
    conn.release(event.size)
    assert memory.used == 0


def test_eager_allocation_stays_within_its_budget() -> None:
    memory = RequestMemory(eager_budget=3 << 20, eager_frame_bytes=2 << 20)
    conns = [ServerConnection(memory=memory) for _ in range(4)]
    for conn in conns:  # each announces 1.5 MiB and sends its first 1 KiB
        feed(conn, struct.pack(">i", 1_500_000) + b"z" * 1024, 65_536)
    # Two frames fit the eager budget whole; the others grow as bytes arrive.
    assert memory.eager_unfilled == 2 * (1_500_000 - 1024)
    assert memory.used == 2 * 1_500_000 + 2 * GROW_FIRST_BYTES
    for conn in conns:
        conn.close()
    assert (memory.used, memory.partial, memory.eager_unfilled) == (0, 0, 0)


def test_no_eager_allocation_past_the_memory_bound() -> None:
    memory = RequestMemory(limit=1 << 20)
    conn = ServerConnection(memory=memory)
    feed(conn, struct.pack(">i", 1_500_000) + b"z" * 1024, 65_536)
    assert memory.used == GROW_FIRST_BYTES and memory.eager_unfilled == 0


def test_idle_connections_hold_no_scratch_buffer() -> None:
    memory = RequestMemory()
    conn = ServerConnection(memory=memory)
    small = encode_request(18, 3, 1, ApiVersionsRequest(client_software_name="a",
                                                        client_software_version="1"))
    feed(conn, small, 65_536)
    assert conn._scratch is None  # emptied scratch goes back to the pool
    feed(conn, small[:7], 65_536)
    assert conn._scratch is not None and conn.receiving  # part of a frame is held


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([10, DIRECT_FRAME_BYTES + 1, 70_000, 300_000, 2_500_000]),
                   min_size=1, max_size=6),
    chunk=st.integers(1_000, 200_000),
    eager_frame_bytes=st.sampled_from([0, 100_000, 4 << 20]),
    release_early=st.booleans(),
)
def test_every_charged_byte_comes_back(
    sizes: list[int], chunk: int, eager_frame_bytes: int, release_early: bool
) -> None:
    memory = RequestMemory(eager_budget=1 << 20, eager_frame_bytes=eager_frame_bytes)
    conn = ServerConnection(memory=memory)
    stream = b"".join(produce_frame(i, n) for i, n in enumerate(sizes))
    cut = len(stream) - 3  # leave one frame unfinished
    feed(conn, stream[:cut], chunk)
    got = []
    while (event := conn.next_event()) is not None:
        got.append(event)
        assert memory.used >= event.size
        if release_early:
            conn.release(event.size)
    assert [e.correlation_id for e in got] == list(range(len(sizes) - 1))
    assert 0 <= memory.partial <= memory.used
    assert 0 <= memory.eager_unfilled <= memory.eager_budget
    conn.close()
    assert (memory.used, memory.partial, memory.eager_unfilled) == (0, 0, 0)
    for event in got:  # late releases after close change nothing
        conn.release(event.size)
    assert memory.used == 0

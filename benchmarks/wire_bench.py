"""Wire codec throughput against kafka-python's protocol classes, in one run.

    python benchmarks/wire_bench.py [--runs 7] [--partitions 100]

(a) Decode a Produce request (v9 flexible, v7 not) of 100 partitions carrying
    1 MiB of records in all: through ``ServerConnection`` fed in 64 KiB chunks
    as a socket would deliver them, then ``next_event``; and ``parse_request``
    on the contiguous frame. Baseline: kafka-python's
    ``ProduceRequest.decode(frame, version, header=True)`` on the same bytes.
    Checked once: both encoders produce the same bytes, and the decoded
    records are memoryviews into the connection's frame buffer (not copies).
(b) Encode a Fetch response (v12 flexible, v11 not) of 100 partitions whose
    records are external (a length, no buffer: a segment-file slice), so only
    size prefix, headers and partition fields are encoded. Baselines:
    kafka-python encoding the same response with the records as bytes (which
    it must copy), and with empty records (headers only).

Each figure is the median of ``--runs`` runs; a run repeats the operation for
at least ``RUN_SECONDS``. MB/s counts the whole frame (records included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import FetchResponse as KFetchResponse
from kafka.protocol.producer import ProduceRequest as KProduceRequest

from odradek.wire.frames import (
    Request,
    ServerConnection,
    encode_request,
    encode_response,
    parse_request,
)
from odradek.wire.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.wire.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.records import Record, build_batch

RUN_SECONDS = 0.15
CHUNK_BYTES = 65_536
TOTAL_RECORDS_BYTES = 1 << 20


class SegmentSlice:
    """A records value the encoder must not touch: only a length."""

    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


def measure(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median seconds per call of each function over ``runs`` interleaved runs.

    Runs of the functions alternate, so load from other processes on the
    machine falls on all of them alike and the ratios stay meaningful.
    """
    reps: dict[str, int] = {}
    for name, fn in fns.items():
        fn()
        n = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - t0
            if elapsed >= RUN_SECONDS / 4:
                break
            n *= 2
        reps[name] = max(1, int(n * RUN_SECONDS / max(elapsed, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            n = reps[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    return {name: statistics.median(values) for name, values in samples.items()}


def row(label: str, seconds: float, nbytes: int, baseline: float | None = None) -> None:
    ratio = f"  {baseline / seconds:5.2f}x vs kafka-python" if baseline else ""
    mbps = nbytes / seconds / 1e6
    print(f"  {label:<52} {seconds * 1e6:9.1f} µs/op {mbps:9.0f} MB/s{ratio}")


# -- (a) Produce decode ------------------------------------------------------------


def produce_batches(partitions: int) -> list[bytes]:
    """One uncompressed v2 batch of 10 records per partition, 1 MiB in all."""
    target = TOTAL_RECORDS_BYTES // partitions
    out = []
    for p in range(partitions):
        value_bytes = target // 10
        for _ in range(4):  # varint widths move with the size; settle in a few steps
            records = [
                Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"key-%d" % p,
                       value=b"v" * value_bytes)
                for i in range(10)
            ]
            batch = build_batch(records)
            if len(batch) == target:
                break
            value_bytes += (target - len(batch)) // 10 or (1 if target > len(batch) else -1)
        out.append(batch)
    return out


def bench_produce(version: int, partitions: int, runs: int) -> None:
    batches = produce_batches(partitions)
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData(
            name="bench-topic",
            partition_data=[
                PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)
            ],
        )],
    )
    frame = encode_request(0, version, 1, body, "bench")
    kbody = KProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[KProduceRequest.TopicProduceData(
            name="bench-topic",
            partition_data=[
                KProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=b)
                for i, b in enumerate(batches)
            ],
        )],
    )
    kbody.with_header(correlation_id=1, client_id="bench")
    kframe = kbody.encode(header=True, framed=True)
    assert bytes(kframe) == frame, "kafka-python and odradek encode different bytes"
    chunks = [memoryview(frame)[i : i + CHUNK_BYTES] for i in range(0, len(frame), CHUNK_BYTES)]
    records_bytes = sum(len(b) for b in batches)
    print(f"Produce v{version} request decode: {partitions} partitions, "
          f"{records_bytes / 1024:.0f} KiB records, {len(frame) / 1024:.0f} KiB frame, "
          f"{len(chunks)} chunks of {CHUNK_BYTES // 1024} KiB")

    conn = ServerConnection()
    # Once: the records are views into the buffer the connection received the frame into.
    conn.receive_data(chunks[0])
    frame_buffer = conn.get_buffer(-1).obj
    for chunk in chunks[1:]:
        conn.receive_data(chunk)
    event = conn.next_event()
    assert isinstance(event, Request) and event.body == body
    for part in event.body.topic_data[0].partition_data:
        assert isinstance(part.records, memoryview) and part.records.obj is frame_buffer
    del event, part

    def via_connection() -> object:
        for chunk in chunks:
            conn.receive_data(chunk)
        return conn.next_event()

    whole = memoryview(frame)[4:]

    def kafka_python() -> object:
        return KProduceRequest.decode(whole, version=version, header=True)

    header_end = RequestHeader.decode_from(whole, 0, 2 if version >= 9 else 1)[1]
    body_only = whole[header_end:]

    def kafka_python_body() -> object:
        return KProduceRequest.decode(body_only, version=version)

    t = measure({
        "connection": via_connection,
        "parse": lambda: parse_request(whole),
        "kafka-python": kafka_python,
        "kafka-python body": kafka_python_body,
    }, runs)
    baseline = t["kafka-python"]
    row("odradek ServerConnection (64 KiB chunks, next_event)",
        t["connection"], len(frame), baseline)
    row("odradek parse_request (contiguous frame)", t["parse"], len(frame), baseline)
    row("kafka-python ProduceRequest.decode(header=True)", baseline, len(frame))
    row("kafka-python ProduceRequest.decode, body only", t["kafka-python body"], len(frame))


# -- (b) Fetch response encode ---------------------------------------------------------


def bench_fetch(version: int, partitions: int, runs: int) -> None:
    per_partition = TOTAL_RECORDS_BYTES // partitions

    def response(records: Callable[[int], Any]) -> FetchResponse:
        return FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            session_id=0,
            responses=[FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    PartitionData(partition_index=i, high_watermark=1000 + i,
                                  last_stable_offset=1000 + i, log_start_offset=0,
                                  records=records(i))
                    for i in range(partitions)
                ],
            )],
        )

    external = response(lambda i: SegmentSlice(per_partition))
    parts = encode_response(1, version, 7, external)
    total = sum(len(p) for p in parts)
    header_bytes = sum(len(p) for p in parts if not isinstance(p, SegmentSlice))
    assert sum(isinstance(p, SegmentSlice) for p in parts) == partitions

    def kresponse(records: bytes) -> Any:
        r = KFetchResponse[version](
            throttle_time_ms=0,
            error_code=0,
            session_id=0,
            responses=[KFetchResponse.FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    KFetchResponse.FetchableTopicResponse.PartitionData(
                        partition_index=i, error_code=0, high_watermark=1000 + i,
                        last_stable_offset=1000 + i, log_start_offset=0,
                        aborted_transactions=[], preferred_read_replica=-1, records=records)
                    for i in range(partitions)
                ],
            )],
        )
        r.with_header(correlation_id=7)
        return r

    payload = b"r" * per_partition
    kfull, kempty = kresponse(payload), kresponse(b"")
    same = b"".join(bytes(p) if not isinstance(p, SegmentSlice) else payload for p in parts)
    assert bytes(kfull.encode(header=True, framed=True)) == same, "encodings differ"
    print(f"Fetch v{version} response encode: {partitions} partitions of "
          f"{per_partition / 1024:.0f} KiB external records; {header_bytes} bytes encoded "
          f"in {len(parts)} parts, {total / 1024:.0f} KiB response")
    t = measure({
        "ours": lambda: encode_response(1, version, 7, external),
        "full": lambda: kfull.encode(header=True, framed=True),
        "empty": lambda: kempty.encode(header=True, framed=True),
    }, runs)
    ours, base_full, base_empty = t["ours"], t["full"], t["empty"]
    row("odradek encode_response (external records)", ours, total)
    row("kafka-python encode, records as bytes (copied)", base_full, total)
    row("kafka-python encode, empty records (headers only)", base_empty, total)
    print(f"  odradek is {base_empty / ours:.2f}x kafka-python encoding the same headers, "
          f"{base_full / ours:.2f}x kafka-python encoding the whole response")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"Python {sys.version.split()[0]}; medians of {args.runs} runs")
    for version in (9, 7):
        bench_produce(version, args.partitions, args.runs)
    for version in (12, 11):
        bench_fetch(version, args.partitions, args.runs)
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

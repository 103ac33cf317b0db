"""Offsets with gaps, as compaction leaves them, survive an unclean restart.

A real ``odradek serve`` creates the topic and stops; the test then writes the
partition's segments itself — batches at offsets 0–9 and 20–29, in one segment
or in two (the second based at 15, its first batch at 20, as a cleaned segment
keeps its original base) — removes the indexes and the clean-shutdown marker
(so start-up recovers every byte), and starts the broker again. Recovery must
keep both batches: a consumer reads all twenty records at their offsets, and
the next produced record gets offset 30.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.storage.names import CLEAN_SHUTDOWN_FILE, segment_file_name
from odradek.wire.records import Record, build_batch
from tests.support.process import ServerProcess

TS = 1_700_000_000_000


def batch(base: int) -> bytes:
    return build_batch(
        [Record(base + i, TS + base + i, f"k{base + i}".encode(), f"v{base + i}".encode())
         for i in range(10)],
        base_offset=base,
    )


def read_all(bootstrap: str, topic: str, high: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gaps",
                         "enable.auto.commit": False, "check.crcs": True})
    out: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("layout", ["one-segment", "two-segments"])
def test_gapped_offsets_recover_whole_and_the_next_append_follows_them(
    tmp_path: Path, layout: str
) -> None:
    server = ServerProcess(tmp_path, "num.partitions=1")
    server.start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("compacted", 1, 1)])["compacted"].result(15)
    finally:
        assert server.stop() == 0
    pdir = tmp_path / "compacted-0"
    for f in pdir.iterdir():
        if f.suffix in (".log", ".index", ".timeindex"):
            f.unlink()
    if layout == "one-segment":
        (pdir / segment_file_name(0, ".log")).write_bytes(batch(0) + batch(20))
    else:
        (pdir / segment_file_name(0, ".log")).write_bytes(batch(0))
        (pdir / segment_file_name(15, ".log")).write_bytes(batch(20))
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()

    server.start()
    try:
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "w"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("compacted", 0), timeout=10)
        finally:
            consumer.close()
        assert (low, high) == (0, 30)
        got = read_all(server.bootstrap, "compacted", high)
        expected = [(o, f"v{o}".encode()) for o in [*range(10), *range(20, 30)]]
        assert got == expected

        delivered: list[int] = []
        producer = Producer({"bootstrap.servers": server.bootstrap})
        producer.produce("compacted", b"after", partition=0,
                         on_delivery=lambda err, m: delivered.append(
                             -1 if err is not None else m.offset()))
        assert producer.flush(15) == 0
        assert delivered == [30]
    finally:
        assert server.stop() == 0

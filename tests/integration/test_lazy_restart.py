"""Restarts with logs opened lazily: after a clean stop no segment file is read at
start-up, and each log is read on first use. A log not yet touched must answer
ListOffsets, Fetch and Produce as before the stop; after kill -9 a torn tail is
still cut by recovery at start-up."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.process import ServerProcess

PARTITIONS = 3
PER_PARTITION = 200
T0 = 1_700_000_000_000


def _produce(bootstrap: str, topic: str, count: int, *, first_ts: int) -> dict[int, list[int]]:
    """``count`` records per partition with timestamps first_ts + i; their offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        offsets[msg.partition()].append(msg.offset())  # type: ignore[attr-defined]

    for i in range(count):
        for p in range(PARTITIONS):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p, timestamp=first_ts + i,
                             on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return offsets


def _consume(bootstrap: str, topic: str,
             ends: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition up to ``ends`` (deadline 30 s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lazy",
                         "enable.auto.commit": False})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + 30
        while any(len(out[p]) < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def test_untouched_logs_answer_list_offsets_fetch_and_produce_after_a_clean_restart(
        tmp_path: Path) -> None:
    server = ServerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("lazy", PARTITIONS, 1)])["lazy"].result(10)
        _produce(server.bootstrap, "lazy", PER_PARTITION, first_ts=T0)
        assert server.stop() == 0

        server.start()
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "lo"})
        try:
            for p in range(PARTITIONS):
                tp = TopicPartition("lazy", p)
                assert consumer.get_watermark_offsets(tp, timeout=10) == (0, PER_PARTITION)
            # ListOffsets by timestamp: the first record at or after each time.
            wanted = [TopicPartition("lazy", p, T0 + 50 + p) for p in range(PARTITIONS)]
            found = consumer.offsets_for_times(wanted, timeout=10)
            assert [t.offset for t in found] == [50 + p for p in range(PARTITIONS)]
            late = consumer.offsets_for_times([TopicPartition("lazy", 0, T0 + 10_000)],
                                              timeout=10)
            assert late[0].offset == -1  # past the newest timestamp: the end (-1)
        finally:
            consumer.close()

        stored = _consume(server.bootstrap, "lazy", {p: PER_PARTITION for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            assert stored[p] == [(i, f"{p}-{i}".encode()) for i in range(PER_PARTITION)]

        # The first append reads the active segment and continues at the log end.
        offsets = _produce(server.bootstrap, "lazy", 5, first_ts=T0 + PER_PARTITION)
        assert offsets == {p: list(range(PER_PARTITION, PER_PARTITION + 5))
                           for p in range(PARTITIONS)}
        assert server.stop() == 0

        # What was appended after the lazy open survives another clean restart
        # and a full read.
        server.start()
        stored = _consume(server.bootstrap, "lazy",
                          {p: PER_PARTITION + 5 for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            assert [o for o, _ in stored[p]] == list(range(PER_PARTITION + 5))
    finally:
        server.kill()


def test_a_torn_tail_is_still_cut_after_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("torn", PARTITIONS, 1)])["torn"].result(10)
        _produce(server.bootstrap, "torn", PER_PARTITION, first_ts=T0)
        server.kill()  # no clean-shutdown marker

        # A torn write at the end of partition 1: a batch header promising more
        # bytes than follow it.
        segment = data / "torn-1" / "00000000000000000000.log"
        with open(segment, "ab") as f:
            f.write((PER_PARTITION).to_bytes(8, "big") + (500).to_bytes(4, "big") + b"\x00" * 30)

        server.start()
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "torn"})
        try:
            for p in range(PARTITIONS):
                tp = TopicPartition("torn", p)
                assert consumer.get_watermark_offsets(tp, timeout=10) == (0, PER_PARTITION)
        finally:
            consumer.close()
        stored = _consume(server.bootstrap, "torn", {p: PER_PARTITION for p in range(PARTITIONS)})
        assert [o for o, _ in stored[1]] == list(range(PER_PARTITION))
        offsets = _produce(server.bootstrap, "torn", 1, first_ts=T0 + PER_PARTITION)
        assert offsets[1] == [PER_PARTITION]
        assert server.stop() == 0
        assert not segment.read_bytes().endswith(b"\x00" * 30)
    finally:
        server.kill()

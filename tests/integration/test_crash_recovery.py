"""kill -9 mid-produce: every acknowledged record survives, offsets are never reused."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.process import ServerProcess

PARTITIONS = 2


def _read_all(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None
                out[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def test_kill_9_mid_produce_loses_nothing_acknowledged(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, "log.flush.interval.messages=1").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("durable", PARTITIONS, 1)])["durable"].result(10)
        acked: dict[bytes, tuple[int, int]] = {}
        lock = threading.Lock()

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                with lock:
                    acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "1",
                             "linger.ms": 1, "message.timeout.ms": 3000, "retries": 0})
        i = 0
        deadline = time.monotonic() + 30
        while len(acked) < 2000 and time.monotonic() < deadline:
            producer.produce("durable", f"r{i}".encode(), partition=i % PARTITIONS,
                             on_delivery=on_delivery)
            producer.poll(0)
            i += 1
        server.kill()  # mid-produce: requests are still in flight
        producer.flush(5)
        with lock:
            acked_now = dict(acked)
        assert len(acked_now) >= 2000
        high_before = {p: max((o for q, o in acked_now.values() if q == p), default=-1) + 1
                       for p in range(PARTITIONS)}

        server = ServerProcess(tmp_path).start()
        stored = _read_all(server.bootstrap, "durable")
        by_value = {v: (p, o) for p, recs in stored.items() for o, v in recs}
        for value, where in acked_now.items():
            assert by_value.get(value) == where, f"acknowledged {value!r} lost or moved"
        for p in range(PARTITIONS):
            offsets = [o for o, _ in stored[p]]
            assert offsets == list(range(len(offsets)))  # contiguous, no holes, no repeats
            assert len(offsets) >= high_before[p]  # the high watermark did not move back

        # new records continue after everything that was stored: offsets never reused
        producer = Producer({"bootstrap.servers": server.bootstrap})
        new_offsets: list[int] = []
        producer.produce("durable", b"after", partition=0,
                         on_delivery=lambda e, m: new_offsets.append(m.offset()))
        assert producer.flush(10) == 0
        assert new_offsets == [len(stored[0])]
    finally:
        server.kill()


def test_clean_stop_and_restart_keeps_topics_configs_and_data(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        topic = NewTopic("kept", 3, 1, config={"retention.ms": "123456"})
        admin.create_topics([topic])["kept"].result(10)
        producer = Producer({"bootstrap.servers": server.bootstrap})
        for i in range(300):
            producer.produce("kept", str(i).encode(), partition=i % 3)
        assert producer.flush(10) == 0
        assert server.stop() == 0
        server = ServerProcess(tmp_path).start()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        md = admin.list_topics(timeout=10)
        assert len(md.topics["kept"].partitions) == 3
        from confluent_kafka.admin import ConfigResource

        res = ConfigResource(ConfigResource.Type.TOPIC, "kept")
        assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "123456"
        stored = _read_all(server.bootstrap, "kept", 3)
        assert sum(len(v) for v in stored.values()) == 300
    finally:
        server.kill()


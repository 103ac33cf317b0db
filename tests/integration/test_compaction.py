"""Log compaction with a real client: the cleaner keeps the latest value of each key
at its original offset, the latest values stay readable while it runs, tombstones
go once delete.retention.ms has passed, and keyless records are refused."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import Broker

COMPACTED = {
    "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
}
KEYS = 100


def _read(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    break
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        assert not out or out[-1][0] < high
        return out
    finally:
        consumer.close()


def test_cleaner_keeps_the_latest_value_of_each_key_and_drops_tombstones() -> None:
    with Broker(**{"log.cleaner.backoff.ms": "50"}) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("table", 1, 1, config=COMPACTED)])["table"].result(10)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        latest: dict[bytes, tuple[int, bytes]] = {}

        def delivered(err: object, msg: object) -> None:
            assert err is None, err
            latest[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

        for i in range(10_000):
            key = f"key-{i % KEYS}".encode()
            producer.produce("table", f"value-{i}".encode(), key=key, on_delivery=delivered)
            if i % 1000 == 999:
                producer.flush(10)
                time.sleep(0.11)  # segment.ms passes: the next append rolls
        producer.flush(10)
        expected = sorted((offset, key, value) for key, (offset, value) in latest.items())

        def nudge() -> None:
            time.sleep(0.12)  # roll the active segment so it can be cleaned, add dirt
            producer.produce("table", b"x", key=b"nudge", on_delivery=delivered)
            producer.flush(10)

        deadline = time.monotonic() + 60
        while True:
            stored = _read(bootstrap, "table")
            by_key = {k: (o, v) for o, k, v in stored}
            # At every moment, every key reads back with its latest value.
            for offset, key, value in expected:
                assert by_key.get(key) == (offset, value), f"{key!r} lost its latest value"
            rows = [r for r in stored if r[1] != b"nudge"]
            if rows == expected:
                break
            assert time.monotonic() < deadline, f"{len(rows)} rows, want {len(expected)}"
            nudge()

        for n in range(10):  # tombstones for ten keys
            producer.produce("table", None, key=f"key-{n}".encode(), on_delivery=delivered)
        producer.flush(10)
        gone = {f"key-{n}".encode() for n in range(10)}
        deadline = time.monotonic() + 60
        while True:
            stored = _read(bootstrap, "table")
            keys = {k for _, k, _ in stored}
            if not keys & gone:
                break
            assert time.monotonic() < deadline, "tombstones were never removed"
            nudge()
        live = {k: (o, v) for o, k, v in stored}
        for offset, key, value in expected:
            if key not in gone:
                assert live[key] == (offset, value)


def test_a_record_without_a_key_is_refused_on_a_compacted_topic() -> None:
    with Broker() as broker:
        broker.create_topic("keyed", 1, {"cleanup.policy": "compact"})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "message.send.max.retries": 0})
        errors: list[str] = []
        producer.produce("keyed", b"no key",
                         on_delivery=lambda err, _msg: errors.append(err.name() if err else ""))
        producer.flush(10)  # its own batch: a batch with a keyless record fails whole
        producer.produce("keyed", b"with key", key=b"k",
                         on_delivery=lambda err, _msg: errors.append(err.name() if err else ""))
        producer.flush(10)
        assert errors[0] == "INVALID_RECORD"
        assert errors[1] == ""


@pytest.mark.parametrize("policy", ["compact,delete"])
def test_compact_and_delete_still_applies_retention(policy: str) -> None:
    with Broker(**{"log.retention.check.interval.ms": "50"}) as broker:
        broker.create_topic("both", 1, {"cleanup.policy": policy, "retention.ms": "100",
                                        "segment.ms": "50"})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("both", b"old", key=b"k")
        producer.flush(10)
        time.sleep(0.2)
        producer.produce("both", b"new", key=b"k2")
        producer.flush(10)
        deadline = time.monotonic() + 20
        while b"old" in [v for _, _, v in _read(broker.bootstrap_servers, "both")]:
            assert time.monotonic() < deadline
            time.sleep(0.1)

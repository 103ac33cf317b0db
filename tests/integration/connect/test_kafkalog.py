"""The internal-topic log and the offsets topic against a real broker."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from odradek.connect.runtime.kafkalog import KafkaLog, KafkaLogError, ensure_topic
from odradek.connect.runtime.offset_topic import TopicOffsets, offset_key
from odradek.testing.broker import Broker


def _conf(broker: Broker) -> dict[str, str | int | float | bool]:
    return {"bootstrap.servers": broker.bootstrap_servers}


def test_ensure_topic_creates_a_compacted_topic_and_refuses_a_deleting_one(
        odradek_broker: Broker) -> None:
    conf = _conf(odradek_broker)
    assert ensure_topic(conf, "connect-configs", partitions=1, replication_factor=1,
                        exactly_one_partition=True) == 1
    admin = AdminClient(dict(conf))
    res = ConfigResource("topic", "connect-configs")
    assert admin.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"
    admin.create_topics([NewTopic("plain", 2, 1)])["plain"].result(10)
    with pytest.raises(KafkaLogError, match=r"cleanup\.policy=delete"):
        ensure_topic(conf, "plain", partitions=2, replication_factor=1)
    admin.create_topics([NewTopic("wide", 3, 1, config={"cleanup.policy": "compact"})]
                        )["wide"].result(10)
    with pytest.raises(KafkaLogError, match="exactly 1"):
        ensure_topic(conf, "wide", partitions=1, replication_factor=1,
                     exactly_one_partition=True)


def test_read_to_end_sees_every_record_written_before_it(odradek_broker: Broker) -> None:
    conf = _conf(odradek_broker)
    ensure_topic(conf, "state", partitions=3, replication_factor=1)
    seen: list[tuple[bytes | None, bytes | None]] = []
    lock = threading.Lock()

    def on_record(_p: int, _o: int, key: bytes | None, value: bytes | None) -> None:
        with lock:
            seen.append((key, value))

    writer = Producer(dict(conf))
    for i in range(500):
        writer.produce("state", key=f"k{i % 50}", value=f"v{i}")
    writer.flush(10)
    log = KafkaLog("state", conf, conf, on_record)
    log.start()
    try:
        with lock:
            assert len(seen) == 500
        log.write("late", b"x")
        log.write("gone", None)
        log.read_to_end()
        with lock:
            assert seen[-2:] == [(b"late", b"x"), (b"gone", None)] or set(seen[-2:]) == {
                (b"late", b"x"), (b"gone", None)}
            assert len(seen) == 502
    finally:
        log.stop()


def test_read_to_end_passes_transaction_markers_and_skips_aborted_records(
        odradek_broker: Broker) -> None:
    conf = _conf(odradek_broker)
    ensure_topic(conf, "txstate", partitions=1, replication_factor=1)
    p = Producer({**conf, "transactional.id": "kafkalog-test"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("txstate", key="a", value="committed")
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce("txstate", key="b", value="aborted")
    p.abort_transaction(10)
    seen: list[bytes | None] = []
    log = KafkaLog("txstate", conf, None, lambda _p, _o, _k, v: seen.append(v),
                   read_committed=True)
    log.start(timeout_s=20)
    try:
        assert seen == [b"committed"]
    finally:
        log.stop()


def test_topic_offsets_survive_a_new_store_and_forget_tombstones(odradek_broker: Broker) -> None:
    conf = _conf(odradek_broker)
    first = TopicOffsets("connect-offsets", conf, conf, partitions=5, replication_factor=1)
    first.start()
    first.put("src", [({"file": "/a"}, {"position": 10}), ({"file": "/b"}, {"position": 7})])
    first.put("src", [({"file": "/a"}, {"position": 20})])
    first.put("other", [({"file": "/a"}, {"position": 1})])
    first.put("other", [({"file": "/a"}, None)])
    first.stop()
    second = TopicOffsets("connect-offsets", conf, conf, partitions=5, replication_factor=1)
    second.start()
    try:
        assert second.get("src", {"file": "/a"}) == {"position": 20}
        assert sorted(second.of("src"), key=lambda po: po[0]["file"]) == [
            ({"file": "/a"}, {"position": 20}), ({"file": "/b"}, {"position": 7})]
        assert second.get("other", {"file": "/a"}) is None
    finally:
        second.stop()
    # Kafka's format: JSON key [connector, partition], JSON value
    c = Consumer({**conf, "group.id": "peek", "auto.offset.reset": "earliest"})
    tps = [TopicPartition("connect-offsets", p, 0) for p in range(5)]
    c.assign(tps)
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    raw = {}
    deadline = time.monotonic() + 20
    while any(0 < ends[tp.partition] > tp.offset for tp in c.position(tps)):
        assert time.monotonic() < deadline, "the offsets topic was not read to its end"
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            raw[m.key()] = m.value()
    c.close()
    assert raw[offset_key("src", {"file": "/a"})] == b'{"position":20}'
    assert json.loads(offset_key("src", {"file": "/a"})) == ["src", {"file": "/a"}]
    assert raw[b'["other",{"file":"/a"}]'] is None

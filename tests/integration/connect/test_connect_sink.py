"""A sink's pipeline: converter, transforms with a predicate, errors.tolerance
with a dead letter queue (created by the worker, with the context headers),
and its committed offsets through the API."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer

from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, running, wait_for

P = "tests.integration.connect.plugins"


def test_sink_transforms_and_dead_letter_queue(connect: Running) -> None:
    bootstrap = connect.broker.bootstrap_servers
    connect.broker.create_topic("events", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (b"xa", b"bad", b"yb", b"xc"):
        producer.produce("events", key=b"k-" + value, value=value)
    producer.flush(10)
    out = connect.tmp / "out.txt"
    config = {
        "connector.class": "FileStreamSink", "file": str(out), "topics.regex": "ev.*",
        "value.converter": f"{P}.FailingConverter",
        "transforms": "up", "transforms.up.type": f"{P}.UpperCase",
        "transforms.up.predicate": "x", "predicates": "x",
        "predicates.x.type": f"{P}.StartsWith", "predicates.x.prefix": "x",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}
    assert call("POST", connect.url + "/connectors", {"name": "s", "config": config})[0] == 201
    wait_for("s running", lambda: running(connect.url, "s"))
    wait_for("three lines", lambda: out.exists() and out.read_text().count("\n") == 3)
    assert out.read_text(encoding="utf-8") == "XA\nyb\nXC\n"

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["dlq"])
    got = []
    wait_for("the DLQ record", lambda: got.extend(
        m for m in consumer.consume(10, timeout=0.5) if m.error() is None) or got)
    consumer.close()
    assert (got[0].key(), got[0].value()) == (b"k-bad", b"bad")
    headers = dict(got[0].headers() or [])
    assert headers["__connect.errors.topic"] == b"events"
    assert headers["__connect.errors.offset"] == b"1"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.connector.name"] == b"s"
    assert headers["__connect.errors.exception.message"] == b"bad data"

    assert call("PUT", connect.url + "/connectors/s/stop")[0] == 204
    status, body = call("GET", connect.url + "/connectors/s/offsets")
    assert status == 200, body
    assert body == {"offsets": [{"partition": {"kafka_topic": "events", "kafka_partition": 0},
                                 "offset": {"kafka_offset": 4}}]}
    assert call("GET", connect.url + "/connectors/s/topics")[1] == {"s": {"topics": ["events"]}}
    status, body = call("PATCH", connect.url + "/connectors/s/offsets", {"offsets": [
        {"partition": {"kafka_topic": "events", "kafka_partition": 0},
         "offset": {"kafka_offset": 2}}]})
    assert status == 200, body
    assert call("GET", connect.url + "/connectors/s/offsets")[1]["offsets"][0]["offset"] == {
        "kafka_offset": 2}
    status, body = call("DELETE", connect.url + "/connectors/s/offsets")
    assert status == 200 and "reset successfully" in body["message"]
    assert call("GET", connect.url + "/connectors/s/offsets")[1] == {"offsets": []}


def test_source_keys_headers_and_partition(connect: Running) -> None:
    connect.broker.create_topic("fixed", partitions=2)
    config = {"connector.class": f"{P}.FixedSourceConnector", "topic": "fixed"}
    assert call("POST", connect.url + "/connectors", {"name": "fx", "config": config})[0] == 201
    consumer = Consumer({"bootstrap.servers": connect.broker.bootstrap_servers,
                         "group.id": "fx-check", "auto.offset.reset": "earliest"})
    consumer.subscribe(["fixed"])
    got: list[Any] = []
    wait_for("two records", lambda: got.extend(
        m for m in consumer.consume(10, timeout=0.2) if m.error() is None) or len(got) == 2)
    consumer.close()
    assert [(m.partition(), m.key(), m.value()) for m in got] == [
        (0, b"k0", b"{'n': 0}"), (0, b"k1", b"{'n': 1}")]
    assert got[0].headers() == [("h", b"v"), ("n", b"0")]
    wait_for("the offset", lambda: call("GET", connect.url + "/connectors/fx/offsets")[1][
        "offsets"] == [{"partition": {"fixed": 1}, "offset": {"i": 1}}])

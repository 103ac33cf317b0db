"""``put`` failures follow Kafka: an exception fails the task whatever
``errors.tolerance`` says, a RetriableError retries the same batch after the
task's ``context.timeout``, and single records reported through the errant
record reporter (KIP-610) go to the DLQ with tolerance ``all`` and fail the
task with ``none``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, running, state, wait_for

SINK = "tests.integration.connect.sink_plugins.MisbehavingSinkConnector"


def _produce(connect: Running, topic: str, values: list[bytes]) -> None:
    connect.broker.create_topic(topic, partitions=1)
    producer = Producer({"bootstrap.servers": connect.broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, key=b"k-" + value, value=value)
    producer.flush(10)


def _create(connect: Running, name: str, out: Path, **extra: str) -> None:
    config = {"connector.class": SINK, "topics": "in", "out.file": str(out), **extra}
    status, body = call("POST", connect.url + "/connectors", {"name": name, "config": config})
    assert status == 201, body


def _puts(out: Path) -> list[list[str]]:
    if not out.exists():
        return []
    return [json.loads(line)["values"] for line in out.read_text().splitlines()]


def _read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        wait_for(f"{count} records on {topic}", lambda: got.extend(
            m for m in consumer.consume(10, timeout=0.5) if m.error() is None
        ) or len(got) >= count)
    finally:
        consumer.close()
    return got


def _failed_trace(connect: Running, name: str) -> str:
    wait_for("the task FAILED", lambda: state(connect.url, name)[1] == ["FAILED"])
    return str(call("GET", f"{connect.url}/connectors/{name}/status")[1]["tasks"][0]["trace"])


def test_put_exception_fails_the_task_even_with_tolerance_all(connect: Running) -> None:
    _produce(connect, "in", [b"a", b"boom"])
    out = connect.tmp / "out.jsonl"
    _create(connect, "f", out, mode="fail", **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-f",
        "errors.deadletterqueue.topic.replication.factor": "1"})
    assert "put exploded on boom" in _failed_trace(connect, "f")
    topics = AdminClient({"bootstrap.servers": connect.broker.bootstrap_servers}
                         ).list_topics(timeout=10).topics
    assert "dlq-f" not in topics  # nothing was sent to the DLQ


def test_retriable_put_is_retried_with_the_same_batch(connect: Running) -> None:
    _produce(connect, "in", [b"a", b"b", b"c"])
    out = connect.tmp / "out.jsonl"
    _create(connect, "r", out, mode="retriable", retries="2")
    wait_for("every value put", lambda: sum(len(p) for p in _puts(out)[2:]) == 3)
    puts = _puts(out)
    assert puts[0] == puts[1] == puts[2]  # two retries of the first batch
    assert [v for p in puts[2:] for v in p] == ["a", "b", "c"]
    assert running(connect.url, "r")


def test_reported_record_goes_to_the_dlq_with_tolerance_all(connect: Running) -> None:
    _produce(connect, "in", [b"a", b"bad", b"c"])
    out = connect.tmp / "out.jsonl"
    _create(connect, "rep", out, mode="report", **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-rep",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"})
    got = _read_all(connect.broker.bootstrap_servers, "dlq-rep", 1)
    assert [(m.key(), m.value()) for m in got] == [(b"k-bad", b"bad")]
    headers = dict(got[0].headers() or [])
    assert headers["__connect.errors.stage"] == b"TASK_PUT"
    assert headers["__connect.errors.topic"] == b"in"
    assert headers["__connect.errors.offset"] == b"1"
    assert headers["__connect.errors.exception.message"] == b"cannot store bad"
    assert running(connect.url, "rep")
    wait_for("the offsets committed past the reported record", lambda: call(
        "GET", connect.url + "/connectors/rep/offsets")[1]["offsets"] == [
        {"partition": {"kafka_topic": "in", "kafka_partition": 0},
         "offset": {"kafka_offset": 3}}])


def test_reported_record_fails_the_task_with_tolerance_none(connect: Running) -> None:
    _produce(connect, "in", [b"a", b"bad"])
    out = connect.tmp / "out.jsonl"
    _create(connect, "none", out, mode="report")
    trace = _failed_trace(connect, "none")
    assert "ToleranceExceeded" in trace and "cannot store bad" in trace


def test_a_reported_record_not_consumed_is_converted_again(connect: Running) -> None:
    _produce(connect, "in", [b"a", b"bad"])
    out = connect.tmp / "out.jsonl"
    _create(connect, "new", out, mode="report-new", **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq-new",
        "errors.deadletterqueue.topic.replication.factor": "1"})
    got = _read_all(connect.broker.bootstrap_servers, "dlq-new", 1)
    assert [(m.key(), m.value()) for m in got] == [(b"made-key", b"made-value")]

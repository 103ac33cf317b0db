"""The dead letter queue topic's settings: created with one partition and
``errors.deadletterqueue.topic.replication.factor`` replicas (Kafka's
default 3 fails the task on a smaller cluster, as in Kafka), the setting
checked, and a sink may not consume its own DLQ."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, state, wait_for

P = "tests.integration.connect.plugins"


def _sink(connect: Running, **extra: str) -> dict[str, str]:
    return {"name": "s", "connector.class": "FileStreamSink", "file": str(connect.tmp / "out.txt"),
            "topics": "events", "value.converter": f"{P}.FailingConverter",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq", **extra}


def _produce_bad(connect: Running) -> None:
    connect.broker.create_topic("events", partitions=2)
    producer = Producer({"bootstrap.servers": connect.broker.bootstrap_servers})
    producer.produce("events", value=b"bad", partition=1)
    producer.flush(10)


def test_dlq_topic_created_with_one_partition_and_the_replication_factor(
        connect: Running) -> None:
    _produce_bad(connect)
    config = _sink(connect, **{"errors.deadletterqueue.topic.replication.factor": "1"})
    assert call("POST", connect.url + "/connectors", {"name": "s", "config": config})[0] == 201
    admin = AdminClient({"bootstrap.servers": connect.broker.bootstrap_servers})
    topic = wait_for("the DLQ topic", lambda: admin.list_topics(timeout=10).topics.get("dlq"))
    assert [len(p.replicas) for p in topic.partitions.values()] == [1]  # one partition, RF 1
    assert state(connect.url, "s") == ("RUNNING", ["RUNNING"])


def test_default_replication_factor_3_fails_on_a_single_broker(connect: Running) -> None:
    _produce_bad(connect)
    assert call("POST", connect.url + "/connectors",
                {"name": "s", "config": _sink(connect)})[0] == 201
    wait_for("the task FAILED", lambda: state(connect.url, "s")[1] == ["FAILED"])
    trace = call("GET", connect.url + "/connectors/s/status")[1]["tasks"][0]["trace"]
    assert "REPLICATION_FACTOR" in trace.upper().replace(" ", "_"), trace
    admin = AdminClient({"bootstrap.servers": connect.broker.bootstrap_servers})
    assert "dlq" not in admin.list_topics(timeout=10).topics


def test_replication_factor_and_dlq_topic_are_validated(connect: Running) -> None:
    for bad in ("0", "-2", "40000", "three"):
        config = _sink(connect, **{"errors.deadletterqueue.topic.replication.factor": bad})
        status, body = call("POST", connect.url + "/connectors",
                            {"name": "s", "config": config})
        assert status == 400, (bad, body)
        assert "errors.deadletterqueue.topic.replication.factor" in body["message"], body
    config = _sink(connect, **{"errors.deadletterqueue.topic.replication.factor": "-1"})
    status, body = call("PUT", connect.url + "/connector-plugins/FileStreamSink/config/validate",
                        config)
    assert status == 200 and body["error_count"] == 0, body
    for given, setting in ((_sink(connect, topics="events,dlq"), "topics=events,dlq"),
                           ({**_sink(connect), "topics": "", "topics.regex": "d.*"},
                            "topics.regex=d.*")):
        status, body = call("PUT", connect.url
                            + "/connector-plugins/FileStreamSink/config/validate", given)
        assert status == 200 and body["error_count"] == 1, body
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
        assert setting in errors["errors.deadletterqueue.topic.name"][0]

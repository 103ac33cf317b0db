"""Source connectors create their topics (KIP-158): the default group's
partitions, replication factor and topic configs, a named group chosen by
include/exclude patterns, nothing created without the settings or with the
worker's ``topic.creation.enable=false``, and the settings validated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from odradek.connect.runtime.worker import StandaloneWorker
from odradek.testing.broker import Broker
from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, running, wait_for, worker_props

DEFAULT = "topic.creation.default."


def _source(tmp: Path, topic: str, **extra: str) -> dict[str, str]:
    path = tmp / f"{topic}.txt"
    path.write_text("a\nb\n", encoding="utf-8")
    return {"connector.class": "FileStreamSource", "file": str(path), "topic": topic, **extra}


def _topic(bootstrap: str, name: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return wait_for(f"topic {name}", lambda: admin.list_topics(timeout=10).topics.get(name))


def _config(bootstrap: str, name: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(10)
    return str(entries[key].value)


def _start(connect_url: str, name: str, config: dict[str, str]) -> None:
    status, body = call("POST", connect_url + "/connectors", {"name": name, "config": config})
    assert status == 201, body
    wait_for(f"{name} running", lambda: running(connect_url, name))


def test_default_group_creates_the_topic_with_its_settings(connect: Running) -> None:
    bootstrap = connect.broker.bootstrap_servers
    _start(connect.url, "fs", _source(connect.tmp, "created", **{
        DEFAULT + "partitions": "3", DEFAULT + "replication.factor": "1",
        DEFAULT + "cleanup.policy": "compact"}))
    assert len(_topic(bootstrap, "created").partitions) == 3
    assert _config(bootstrap, "created", "cleanup.policy") == "compact"


def test_a_named_group_takes_the_topics_it_includes(connect: Running) -> None:
    bootstrap = connect.broker.bootstrap_servers
    groups = {DEFAULT + "partitions": "1", DEFAULT + "replication.factor": "1",
              "topic.creation.groups": "hot",
              "topic.creation.hot.include": "hot-.*, warm", "topic.creation.hot.exclude": ".*-x",
              "topic.creation.hot.partitions": "2",
              "topic.creation.hot.retention.ms": "3600000"}
    for name, topic in (("h", "hot-a"), ("x", "hot-x"), ("w", "warm")):
        _start(connect.url, name, _source(connect.tmp, topic, **groups))
    assert len(_topic(bootstrap, "hot-a").partitions) == 2
    assert _config(bootstrap, "hot-a", "retention.ms") == "3600000"
    assert len(_topic(bootstrap, "warm").partitions) == 2
    assert len(_topic(bootstrap, "hot-x").partitions) == 1  # excluded: the default group
    assert _config(bootstrap, "hot-x", "retention.ms") != "3600000"  # not inherited


def test_nothing_created_without_settings_or_when_the_worker_disables_it(
        tmp_path: Path) -> None:
    with Broker(**{"num.partitions": "1"}) as broker:
        worker = StandaloneWorker(worker_props(broker.bootstrap_servers, tmp_path, **{
            "topic.creation.enable": "false"}))
        url = worker.start_in_thread()
        try:
            _start(url, "off", _source(tmp_path, "by-broker", **{
                DEFAULT + "partitions": "3", DEFAULT + "replication.factor": "1"}))
            _start(url, "plain", _source(tmp_path, "plain"))
            # auto-created by the broker on the first produce, with its defaults
            assert len(_topic(broker.bootstrap_servers, "by-broker").partitions) == 1
            assert len(_topic(broker.bootstrap_servers, "plain").partitions) == 1
        finally:
            worker.stop_thread()


def test_topic_creation_settings_are_validated(connect: Running) -> None:
    validate = connect.url + "/connector-plugins/FileStreamSource/config/validate"
    base = {**_source(connect.tmp, "v"), "name": "v"}
    status, body = call("PUT", validate, {**base, DEFAULT + "partitions": "3"})
    assert status == 200
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors[DEFAULT + "partitions"] == []
    assert "Missing required configuration" in errors[DEFAULT + "replication.factor"][0]
    assert body["error_count"] == 1
    bad = {**base, DEFAULT + "partitions": "0", DEFAULT + "replication.factor": "1",
           "topic.creation.groups": "g", "topic.creation.g.include": "(unclosed"}
    status, body = call("PUT", validate, bad)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors[DEFAULT + "partitions"] and errors["topic.creation.g.include"], errors
    assert body["error_count"] == 2
    status, body = call("POST", connect.url + "/connectors", {"name": "v", "config": bad})
    assert status == 400 and "topic.creation" in body["message"], body

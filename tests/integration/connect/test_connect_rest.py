"""The REST API endpoint by endpoint: status codes and JSON shapes as Kafka
Connect's (a real broker, an in-process worker, real HTTP)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from odradek.connect.runtime.worker import StandaloneWorker
from odradek.testing.broker import Broker
from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, running, state, wait_for, worker_props

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
Check = Callable[[Any], bool]
LOG = "/admin/loggers"
CHECK = "odradek.connect.rest-check"
"""A logger only this test uses (levels set over REST stay in the process)."""
LEVELS = {"ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"}


def _is_error(code: int) -> Check:
    return lambda b: b["error_code"] == code and isinstance(b["message"], str)


def _status_shape(b: Any) -> bool:
    return (set(b) == {"name", "connector", "tasks", "type"}
            and set(b["connector"]) >= {"state", "worker_id"}
            and all(set(t) >= {"id", "state", "worker_id"} for t in b["tasks"]))


def table(tmp: Path) -> list[tuple[str, str, Any, int, Check | None]]:
    src = {"connector.class": SOURCE, "file": str(tmp / "in.txt"), "topic": "rest-lines",
           "tasks.max": "1"}
    sink = {"connector.class": "FileStreamSink", "file": str(tmp / "out.txt"),
            "topics": "rest-lines"}
    return [
        ("GET", "/", None, 200,
         lambda b: set(b) == {"version", "commit", "kafka_cluster_id"} and b["kafka_cluster_id"]),
        ("GET", "/connectors", None, 200, lambda b: b == []),
        ("POST", "/connectors", {"name": "src", "config": src}, 201,
         lambda b: b["name"] == "src" and b["type"] == "source"
         and b["tasks"] == [{"connector": "src", "task": 0}] and b["config"]["name"] == "src"),
        ("POST", "/connectors", {"name": "src", "config": src}, 409, _is_error(409)),
        ("PUT", "/connectors/sink/config", sink, 201, lambda b: b["type"] == "sink"),
        ("PUT", "/connectors/sink/config", {**sink, "tasks.max": "1"}, 200,
         lambda b: b["config"]["tasks.max"] == "1"),
        ("PATCH", "/connectors/sink/config", {"tasks.max": None, "extra.setting": "x"}, 200,
         lambda b: "tasks.max" not in b["config"] and b["config"]["extra.setting"] == "x"),
        ("GET", "/connectors", None, 200, lambda b: b == ["sink", "src"]),
        ("GET", "/connectors?expand=status", None, 200,
         lambda b: set(b) == {"sink", "src"} and _status_shape(b["src"]["status"])),
        ("GET", "/connectors?expand=info&expand=status", None, 200,
         lambda b: set(b["src"]) == {"info", "status"} and b["src"]["info"]["type"] == "source"),
        ("GET", "/connectors/src", None, 200,
         lambda b: set(b) == {"name", "config", "tasks", "type"}),
        ("GET", "/connectors/src/config", None, 200,
         lambda b: b["connector.class"] == SOURCE and b["topic"] == "rest-lines"),
        ("GET", "/connectors/src/status", None, 200, _status_shape),
        ("GET", "/connectors/src/tasks", None, 200,
         lambda b: b[0]["id"] == {"connector": "src", "task": 0}
         and b[0]["config"]["topic"] == "rest-lines"),
        ("GET", "/connectors/src/tasks/0/status", None, 200,
         lambda b: b["id"] == 0 and "state" in b and "worker_id" in b),
        ("GET", "/connectors/src/tasks/7/status", None, 404, _is_error(404)),
        ("POST", "/connectors/src/tasks/0/restart", None, 204, None),
        ("POST", "/connectors/src/restart", None, 204, None),
        ("POST", "/connectors/src/restart?includeTasks=true", None, 202,
         lambda b: b["connector"]["state"] == "RESTARTING"
         and [t["state"] for t in b["tasks"]] == ["RESTARTING"]),
        ("POST", "/connectors/src/restart?includeTasks=true&onlyFailed=true", None, 202,
         lambda b: b["connector"]["state"] != "RESTARTING"),
        ("PUT", "/connectors/src/pause", None, 202, None),
        ("GET", "/connectors/src/status", None, 200,
         lambda b: b["connector"]["state"] == "PAUSED"),
        ("PUT", "/connectors/src/resume", None, 202, None),
        ("GET", "/connectors/src/topics", None, 200, lambda b: set(b) == {"src"}),
        ("PUT", "/connectors/src/topics/reset", None, 202, None),
        ("GET", "/connectors/src/topics", None, 200, lambda b: b == {"src": {"topics": []}}),
        ("GET", "/connectors/src/offsets", None, 200, lambda b: isinstance(b["offsets"], list)),
        ("DELETE", "/connectors/src/offsets", None, 400, _is_error(400)),
        ("PATCH", "/connectors/src/offsets", {"offsets": []}, 400, _is_error(400)),
        ("PUT", "/connectors/src/stop", None, 204, None),
        ("PUT", "/connectors/src/stop", None, 204, None),
        ("GET", "/connectors/src/status", None, 200,
         lambda b: b["connector"]["state"] == "STOPPED" and b["tasks"] == []),
        ("GET", "/connectors/src", None, 200, lambda b: b["tasks"] == []),
        ("PATCH", "/connectors/src/offsets", {"offsets": [
            {"partition": {"filename": str(tmp / "in.txt")}, "offset": {"position": 6}}]}, 200,
         lambda b: b["message"].startswith("The offsets for this connector have been altered")),
        ("GET", "/connectors/src/offsets", None, 200, lambda b: b == {"offsets": [
            {"partition": {"filename": str(tmp / "in.txt")}, "offset": {"position": 6}}]}),
        ("PATCH", "/connectors/src/offsets", {"offsets": [
            {"partition": {"filename": "x"}, "offset": {"position": -1}}]}, 400,
         _is_error(400)),
        ("DELETE", "/connectors/src/offsets", None, 200,
         lambda b: "reset successfully" in b["message"]),
        ("GET", "/connectors/src/offsets", None, 200, lambda b: b == {"offsets": []}),
        ("PUT", "/connectors/src/resume", None, 202, None),
        ("GET", "/connector-plugins", None, 200,
         lambda b: {"class": SOURCE, "type": "source", "version": "1.0"} in b
         and all(p["type"] in ("source", "sink") for p in b)),
        ("GET", "/connector-plugins?connectorsOnly=false", None, 200,
         lambda b: any(p["type"] == "converter" for p in b)),
        ("GET", "/connector-plugins/FileStreamSource/config", None, 200,
         lambda b: [k["name"] for k in b] == ["file", "topic", "batch.size"]
         and b[2]["default_value"] == "2000"),
        ("GET", "/connector-plugins/NoSuchConnector/config", None, 404, _is_error(404)),
        ("PUT", f"/connector-plugins/{SOURCE}/config/validate", {**src, "name": "v"}, 200,
         lambda b: b["name"] == SOURCE and b["error_count"] == 0
         and {c["value"]["name"] for c in b["configs"]} >= {"file", "tasks.max",
                                                              "errors.tolerance"}),
        ("DELETE", "/connectors/sink", None, 204, None),
        ("GET", "/connectors/sink", None, 404, _is_error(404)),
        ("DELETE", "/connectors/sink", None, 404, _is_error(404)),
        ("GET", "/connectors/nope/status", None, 404, _is_error(404)),
        ("PUT", "/connectors/nope/pause", None, 404, _is_error(404)),
        ("GET", "/no/such/path", None, 404, _is_error(404)),
        ("GET", "/admin/loggers", None, 200,
         lambda b: b["root"]["level"] in LEVELS and any(k.startswith("odradek.") for k in b)
         and all(set(v) == {"level", "last_modified"} for v in b.values())),
        ("PUT", f"{LOG}/{CHECK}", {"level": "debug"}, 200, lambda b: b == [CHECK]),
        ("GET", f"{LOG}/{CHECK}", None, 200,
         lambda b: b["level"] == "DEBUG" and isinstance(b["last_modified"], int)),
        ("PUT", f"{LOG}/{CHECK}.child?scope=cluster", {"level": "TRACE"}, 204, None),
        ("GET", f"{LOG}/{CHECK}.child", None, 200, lambda b: b["level"] == "TRACE"),
        ("PUT", f"{LOG}/{CHECK}?scope=worker", {"level": "WARN"}, 200,
         lambda b: b == [CHECK, f"{CHECK}.child"]),
        ("GET", LOG, None, 200, lambda b: b[f"{CHECK}.child"]["level"] == "WARN"),
        ("PUT", f"{LOG}/{CHECK}", {"level": "LOUD"}, 404, _is_error(404)),
        ("PUT", f"{LOG}/{CHECK}", {}, 400, _is_error(400)),
        ("GET", f"{LOG}/no.such.logger", None, 404, _is_error(404)),
        ("DELETE", "/connector-plugins", None, 405, _is_error(405)),
    ]


def test_every_endpoint(connect: Running) -> None:
    (connect.tmp / "in.txt").write_text("first\nsecond\n", encoding="utf-8")
    for method, path, body, code, check in table(connect.tmp):
        status, answer = call(method, connect.url + path, body)
        assert status == code, (method, path, status, answer)
        if check is None:
            assert answer is None, (method, path, answer)
        else:
            assert check(answer), (method, path, answer)
        if path == "/connectors/src/resume":
            wait_for("src running", lambda: running(connect.url, "src"))


def test_create_with_initial_state(connect: Running) -> None:
    config = {"connector.class": "FileStreamSource", "file": str(connect.tmp / "x.txt"),
              "topic": "t"}
    for name, initial, expected in (("a", "PAUSED", "PAUSED"), ("b", "STOPPED", "STOPPED")):
        status, _ = call("POST", f"{connect.url}/connectors",
                         {"name": name, "config": config, "initial_state": initial})
        assert status == 201
        assert state(connect.url, name)[0] == expected
    assert state(connect.url, "b")[1] == []
    status, body = call("POST", f"{connect.url}/connectors",
                        {"name": "c", "config": config, "initial_state": "SLEEPING"})
    assert status == 400 and "initial_state" in body["message"]


def test_pausing_a_source_commits_its_offsets(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    with Broker() as broker:
        broker.create_topic("paused", partitions=1)
        worker = StandaloneWorker({**worker_props(broker.bootstrap_servers, tmp_path),
                                   "offset.flush.interval.ms": "600000"})
        url = worker.start_in_thread()
        try:
            call("POST", url + "/connectors", {"name": "p", "config": {
                "connector.class": "FileStreamSource", "file": str(source), "topic": "paused"}})
            consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                 "group.id": "c", "auto.offset.reset": "earliest"})
            consumer.subscribe(["paused"])
            seen: list[bytes] = []
            wait_for("three records", lambda: seen.extend(
                m.value() or b"" for m in consumer.consume(10, timeout=0.2)
                if m.error() is None) or len(seen) == 3)
            consumer.close()
            assert call("GET", url + "/connectors/p/offsets")[1] == {"offsets": []}
            assert call("PUT", url + "/connectors/p/pause")[0] == 202
            wait_for("the offsets committed", lambda: call(
                "GET", url + "/connectors/p/offsets")[1]["offsets"])
            assert call("GET", url + "/connectors/p/offsets")[1]["offsets"] == [
                {"partition": {"filename": str(source)}, "offset": {"position": 14}}]
        finally:
            worker.stop_thread()

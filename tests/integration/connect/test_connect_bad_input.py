"""Bad input to the REST API: validation names the field, a bad config is 400,
malformed bodies are 400/415/413, and a connector or task that raises is
FAILED with its trace until restarted."""

from __future__ import annotations

from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call, running, state, wait_for

FLAKY = "tests.integration.connect.plugins.FlakyConnector"
VALIDATE = "/connector-plugins/FileStreamSource/config/validate"


def _errors(body: dict[str, object]) -> dict[str, list[str]]:
    return {c["value"]["name"]: c["value"]["errors"]  # type: ignore[index]
            for c in body["configs"] if c["value"]["errors"]}  # type: ignore[attr-defined]


def test_validate_names_each_bad_field(connect: Running) -> None:
    status, body = call("PUT", connect.url + VALIDATE, {
        "connector.class": "FileStreamSource", "name": "v", "topic": "t",
        "batch.size": "zero", "tasks.max": "0", "errors.tolerance": "some",
        "transforms": "a"})
    assert status == 200
    errors = _errors(body)
    assert set(errors) == {"file", "batch.size", "tasks.max", "errors.tolerance",
                           "transforms.a.type"}, errors
    assert body["error_count"] == 5
    assert "file" in errors["file"][0] and "batch.size" in errors["batch.size"][0]


def test_validate_sink_needs_topics(connect: Running) -> None:
    status, body = call("PUT", connect.url + "/connector-plugins/FileStreamSink/config/validate",
                        {"connector.class": "FileStreamSink", "name": "s", "file": "/tmp/x"})
    assert status == 200 and "topics" in _errors(body)


def test_create_with_bad_config_is_400_naming_the_field(connect: Running) -> None:
    cases = [
        ({"connector.class": "FileStreamSource", "topic": "t"}, "file"),
        ({"connector.class": "FileStreamSource", "file": "/x", "topic": "t",
          "batch.size": "-1"}, "batch.size"),
        ({"connector.class": "NoSuchConnector"}, "connector.class"),
        ({"file": "/x"}, "connector.class"),
        ({"connector.class": "FileStreamSource", "file": "/x", "topic": "t",
          "value.converter": "NoSuchConverter"}, "value.converter"),
    ]
    for config, field in cases:
        status, body = call("POST", connect.url + "/connectors", {"name": "bad", "config": config})
        assert status == 400, (config, body)
        assert body["error_code"] == 400 and field in body["message"], (config, body)
    status, body = call("PUT", connect.url + "/connectors/bad/config", cases[0][0])
    assert status == 400 and "file" in body["message"]
    assert call("GET", connect.url + "/connectors")[1] == []


def test_malformed_bodies(connect: Running) -> None:
    url = connect.url + "/connectors"
    status, body = call("POST", url, raw=b"{not json")
    assert (status, body["error_code"]) == (400, 400)
    status, body = call("POST", url, raw=b"name=x", content_type="text/plain")
    assert (status, body["error_code"]) == (415, 415)
    status, body = call("POST", url, raw=b'{"name": "' + b"x" * (2 << 20) + b'"}')
    assert (status, body["error_code"]) == (413, 413)
    status, body = call("POST", url, ["a", "list"])
    assert status == 400
    status, body = call("POST", url, {"name": "n", "config": {"file": {"nested": 1}}})
    assert status == 400 and "file" in body["message"]
    status, body = call("PUT", connect.url + "/connectors/x/config", raw=b"[1")
    assert status == 400


def test_failed_connector_shows_its_trace_and_restarts(connect: Running) -> None:
    flag = connect.tmp / "fail"
    flag.write_text("")
    config = {"connector.class": FLAKY, "fail.file": str(flag)}
    assert call("POST", connect.url + "/connectors", {"name": "f", "config": config})[0] == 201
    status, body = call("GET", connect.url + "/connectors/f/status")
    assert status == 200
    assert body["connector"]["state"] == "FAILED"
    assert "RuntimeError: flaky connector: the fail file exists" in body["connector"]["trace"]
    assert body["tasks"] == []
    flag.unlink()
    assert call("POST", connect.url + "/connectors/f/restart")[0] == 204
    wait_for("f running", lambda: running(connect.url, "f"))
    _status, body = call("GET", connect.url + "/connectors/f/status")
    assert "trace" not in body["connector"]


def test_failed_task_shows_its_trace_and_restarts(connect: Running) -> None:
    flag = connect.tmp / "fail"
    flag.write_text("")
    config = {"connector.class": FLAKY, "fail.file": str(flag), "fail.in": "task"}
    assert call("POST", connect.url + "/connectors", {"name": "f", "config": config})[0] == 201
    wait_for("task failed", lambda: state(connect.url, "f") == ("RUNNING", ["FAILED"]))
    status, body = call("GET", connect.url + "/connectors/f/tasks/0/status")
    assert "flaky task: the fail file exists" in body["trace"]
    flag.unlink()
    status, body = call("POST", connect.url + "/connectors/f/restart?includeTasks=true"
                        "&onlyFailed=true")
    assert status == 202
    assert body["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING"]
    wait_for("f running", lambda: running(connect.url, "f"))

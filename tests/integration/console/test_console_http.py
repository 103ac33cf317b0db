"""The web console over HTTP against a real broker: every page answers, forms
take effect in the cluster (checked with confluent-kafka), the message
browser and the live tail find records, and bad requests are refused."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.parse

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.console.app import MAX_BODY_BYTES
from odradek.testing.broker import Broker
from tests.integration.console.support import (
    RunningConsole,
    committed,
    consume_and_commit,
    get,
    post,
    produce,
    query,
    wait_for,
)

Pair = tuple[Broker, RunningConsole]


def _topics(bootstrap: str) -> dict[str, int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


def test_every_page_answers_with_the_cluster_state(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("orders", partitions=2)
    produce(broker.bootstrap_servers, "orders", ["one", "two", "three"], key="k")
    consume_and_commit(broker.bootstrap_servers, "orders", "billing", 3)
    pages = {
        "/": "Brokers", "/topics": "orders", "/topics/orders": "DEFAULT_CONFIG",
        "/topics/orders/messages?from=start": "three", "/groups": "billing",
        "/groups/billing": "orders", "/acls": "ACLs", "/quotas": "quotas",
        "/users": "SCRAM", "/static/console.css": "body", "/static/tail.js": "EventSource",
    }
    for path, text in pages.items():
        reply = get(console.url + path)
        assert reply.status == 200, (path, reply.body[:300])
        assert text in reply.body, path
    # the sampler has drawn the group's lag, the total and each partition
    wait_for(lambda: console.state.lag_history.get("billing"), "a lag sample of the group")
    group_page = get(console.url + "/groups/billing").body
    assert '<polyline points="' in group_page and "<title>orders-" in group_page
    assert get(console.url + "/topics/missing").status == 404
    assert get(console.url + "/topics/missing/messages").status == 404
    assert get(console.url + "/groups/missing").status == 404
    assert get(console.url + "/nowhere").status == 404


def test_create_grow_configure_and_delete_a_topic(console_broker: Pair) -> None:
    broker, console = console_broker
    reply = post(console.url + "/topics", {"name": "made-here", "partitions": "2",
                                           "replication_factor": "1",
                                           "configs": "retention.ms=3600000"})
    assert reply.status == 200 and query(reply) == {"ok": "created topic made-here"}
    assert _topics(broker.bootstrap_servers)["made-here"] == 2

    reply = post(console.url + "/topics/made-here/partitions", {"count": "4"})
    assert "ok" in query(reply)
    wait_for(lambda: _topics(broker.bootstrap_servers).get("made-here") == 4, "4 partitions")

    reply = post(console.url + "/topics/made-here/config",
                 {"key": "cleanup.policy", "value": "compact"})
    assert "ok" in query(reply)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource("topic", "made-here")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "3600000"
    page = get(console.url + "/topics/made-here").body
    assert "DYNAMIC_TOPIC_CONFIG" in page

    # A refusal comes back as the page with Kafka's error, not a failure page.
    again = post(console.url + "/topics", {"name": "made-here"})
    assert "TOPIC_ALREADY_EXISTS" in query(again)["error"]
    assert "TOPIC_ALREADY_EXISTS" in again.body

    refused = post(console.url + "/topics/made-here/delete", {"confirm": "wrong"})
    assert "confirm" in query(refused)["error"]
    assert "made-here" in _topics(broker.bootstrap_servers)
    reply = post(console.url + "/topics/made-here/delete", {"confirm": "made-here"})
    assert query(reply) == {"ok": "deleted topic made-here"}
    wait_for(lambda: "made-here" not in _topics(broker.bootstrap_servers), "the topic gone")


def test_reset_offsets_takes_effect_and_an_active_group_is_refused(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("ledger", partitions=2)
    # Records in both partitions: the commit below stores an offset only for a
    # partition the consumer read from (librdkafka's sticky partitioner put all
    # ten in one partition once, and partition 0 had no commit).
    produce(broker.bootstrap_servers, "ledger", [f"v{i}" for i in range(5)], partition=0)
    produce(broker.bootstrap_servers, "ledger", [f"v{i}" for i in range(5, 10)], partition=1)
    consume_and_commit(broker.bootstrap_servers, "ledger", "audit", 10)
    assert sum(committed(broker.bootstrap_servers, "audit", "ledger", 2).values()) == 10

    reply = post(console.url + "/groups/audit/reset", {"topic": "ledger", "to": "earliest"})
    assert "ok" in query(reply), reply.url
    assert committed(broker.bootstrap_servers, "audit", "ledger", 2) == {0: 0, 1: 0}
    page = get(console.url + "/groups/audit").body
    assert 'id="total-lag">10<' in page

    reply = post(console.url + "/groups/audit/reset",
                 {"topic": "ledger", "to": "offset", "offset": "1"})
    assert committed(broker.bootstrap_servers, "audit", "ledger", 2) == {0: 1, 1: 1}

    member = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "audit",
                       "enable.auto.commit": False})
    try:
        member.subscribe(["ledger"])
        wait_for(lambda: member.poll(0.2) is not None or member.assignment(), "an assignment")
        reply = post(console.url + "/groups/audit/reset", {"topic": "ledger", "to": "latest"})
        assert "member" in query(reply)["error"]
        assert committed(broker.bootstrap_servers, "audit", "ledger", 2) == {0: 1, 1: 1}
    finally:
        member.close()


def test_message_browser_filters_and_the_produce_form_writes(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("events", partitions=3)
    produce(broker.bootstrap_servers, "events", [f'{{"n": {i}}}' for i in range(30)])
    produce(broker.bootstrap_servers, "events", ["needle in a haystack"], key="special",
            headers=[("trace", b"abc-123")])
    base = console.url + "/topics/events/messages"

    page = get(base + "?from=start&filter=haystack").body
    assert "needle in a haystack" in page and "1 record shown" in page
    assert "needle in a haystack" in get(base + "?from=start&filter=abc-123").body
    assert "needle in a haystack" in get(base + "?from=end&filter=special").body
    newest = get(base + "?from=end&limit=2").body  # the newest two of all partitions
    assert "needle in a haystack" in newest and "2 records shown" in newest
    pretty = get(base + "?from=start&filter=%22n%22:%207%7D").body
    assert "&#34;n&#34;: 7\n}" in pretty  # the JSON value, indented
    future = urllib.parse.quote("2100-01-01T00:00:00")
    assert "0 records shown" in get(base + f"?from=timestamp&timestamp={future}").body
    assert get(base + "?from=sideways").status == 400

    reply = post(base, {"key": "form-key", "value": "written by the form",
                        "headers": "origin=console", "partition": "2"})
    assert query(reply)["ok"].startswith("produced to events-2 at offset")
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check",
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("events", 2, 0)])

        def found() -> bool:
            m = c.poll(0.5)
            return m is not None and not m.error() and m.value() == b"written by the form"

        wait_for(found, "the produced record")
    finally:
        c.close()


def test_live_tail_streams_records_produced_after_it_opened(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("live", partitions=2)
    produce(broker.bootstrap_servers, "live", ["old record"])
    host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    try:
        conn.request("GET", "/topics/live/tail")
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type", "").startswith("text/event-stream")
        assert resp.readline().startswith(b"retry:")  # the stream is open: produce now
        produce(broker.bootstrap_servers, "live", ["fresh record"])
        deadline = time.monotonic() + 10
        event = None
        while time.monotonic() < deadline:
            line = resp.readline()
            if line.startswith(b"data: "):
                event = json.loads(line[6:])
                break
        assert event is not None and event["value"] == "fresh record"
    finally:
        conn.close()
    # A reconnecting EventSource sends the last event's id back: the tail
    # resumes there (here: from offset 0 of every partition, the old record too).
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    try:
        conn.request("GET", "/topics/live/tail", headers={"Last-Event-ID": "0:0,1:0"})
        resp = conn.getresponse()
        values, ids = [], []
        deadline = time.monotonic() + 10
        while len(values) < 2 and time.monotonic() < deadline:
            line = resp.readline()
            if line.startswith(b"id: "):
                ids.append(line[4:].strip().decode())
            if line.startswith(b"data: "):
                values.append(json.loads(line[6:])["value"])
        assert sorted(values) == ["fresh record", "old record"]
        assert all(re.fullmatch(r"0:\d+,1:\d+", i) for i in ids), ids
    finally:
        conn.close()


def _raw(url: str, request: bytes) -> bytes:
    host, port = urllib.parse.urlsplit(url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
            if b"\r\n\r\n" in out:
                break
        return out


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.mark.parametrize("request_bytes", [
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"NOT HTTP AT ALL\r\n\r\n",
], ids=["oversized-header", "oversized-request-line", "malformed-request-line"])
def test_malformed_and_oversized_requests_are_refused(console_broker: Pair,
                                                      request_bytes: bytes) -> None:
    _, console = console_broker
    status = _status(_raw(console.url, request_bytes))
    assert 400 <= status < 500
    assert get(console.url + "/").status == 200


def test_bad_forms_are_refused(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("guarded")
    huge = post(console.url + "/topics",
                {"name": "x", "configs": "a=" + "b" * (MAX_BODY_BYTES + 1)})
    assert huge.status == 413
    assert post(console.url + "/topics", {"name": "x", "partitions": "many"}).status == 400
    assert post(console.url + "/topics", {"partitions": "1"}).status == 400
    assert post(console.url + "/topics", {"name": "x", "configs": "no-equals"}).status == 400
    assert post(console.url + "/groups/g/reset", {"topic": "guarded", "to": "up"}).status == 400
    assert post(console.url + "/acls", {"resource_type": "PLANET", "name": "x",
                                        "pattern_type": "LITERAL", "principal": "User:a",
                                        "operation": "READ", "permission": "ALLOW"}).status == 400
    host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/topics", body=b'{"name": "x"}',
                 headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 415
    conn.close()
    assert "x" not in _topics(broker.bootstrap_servers)


def test_slow_http_clients_stall_neither_the_console_nor_the_broker(console_broker: Pair) -> None:
    broker, console = console_broker
    broker.create_topic("steady")
    host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
    stalled = []
    try:
        for _ in range(50):  # each sends half a request and then nothing
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            stalled.append(s)
        started = time.monotonic()
        assert get(console.url + "/topics").status == 200
        assert time.monotonic() - started < 10
        produce(broker.bootstrap_servers, "steady", ["still served"])
        assert "still served" in get(console.url + "/topics/steady/messages?from=start").body
    finally:
        for s in stalled:
            s.close()


def test_a_stalled_http_client_is_disconnected() -> None:
    with Broker() as broker:
        console = RunningConsole(broker.bootstrap_servers, idle_timeout_s=1.0)
        try:
            host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                started = time.monotonic()
                assert s.recv(100) == b""  # closed by the console, not by the timeout here
                assert time.monotonic() - started < 5
        finally:
            console.close()


def test_access_pages_create_and_delete(console_broker: Pair) -> None:
    _, console = console_broker
    reply = post(console.url + "/quotas", {"entity_type": "user", "entity_name": "alice",
                                           "key": "producer_byte_rate", "value": "1024"})
    assert "ok" in query(reply), reply.url
    assert "producer_byte_rate" in get(console.url + "/quotas").body
    post(console.url + "/quotas", {"entity_type": "user", "entity_name": "alice",
                                   "key": "producer_byte_rate", "delete": "1"})
    assert "producer_byte_rate" not in get(console.url + "/quotas").body.split("<h2>")[0]

    reply = post(console.url + "/users", {"name": "bob", "mechanism": "SCRAM-SHA-256",
                                          "password": "s3cret", "iterations": "4096"})
    assert "ok" in query(reply), reply.url
    assert "<td>bob</td>" in get(console.url + "/users").body
    post(console.url + "/users/delete", {"name": "bob", "mechanism": "SCRAM-SHA-256"})
    assert "<td>bob</td>" not in get(console.url + "/users").body

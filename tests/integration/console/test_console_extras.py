"""The console's live tail lets go when the browser does, its overview charts
the broker's own metrics, and its ACL page works on a secured cluster with
an authorizer (the console acting as the admin principal)."""

from __future__ import annotations

import http.client
import re
import urllib.parse
from pathlib import Path

from odradek.client.security import ClientSecurity
from odradek.console.messages import MAX_TAILS
from odradek.testing.broker import ADMIN_PASSWORD, Broker
from tests.integration.console.support import (
    RunningConsole,
    get,
    post,
    produce,
    query,
    wait_for,
)
from tests.support.cluster import free_port


def test_live_tails_are_bounded_and_end_when_their_clients_go_away() -> None:
    with Broker() as broker:
        broker.create_topic("quiet")
        console = RunningConsole(broker.bootstrap_servers)
        try:
            host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
            conns = []
            for _ in range(MAX_TAILS):
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("GET", "/topics/quiet/tail")
                assert conn.getresponse().status == 200
                conns.append(conn)
            wait_for(lambda: console.state.tails == MAX_TAILS, "every tail streaming")
            assert get(console.url + "/topics/quiet/tail").status == 503  # one too many
            for conn in conns:
                conn.close()
            # No record is produced: the tails notice the closed connections on
            # their own, not on a failed write.
            wait_for(lambda: console.state.tails == 0, "every tail ended", timeout=10)
        finally:
            console.close()


def test_overview_charts_the_brokers_metrics() -> None:
    with Broker(**{"odradek.metrics.listener": "127.0.0.1:0"}) as broker:
        assert broker.app.endpoint is not None
        url = f"http://{broker.app.endpoint.address}/metrics"
        broker.create_topic("busy")
        console = RunningConsole(broker.bootstrap_servers, sample_interval_s=0.2,
                                 metrics_urls=[url])
        try:
            assert "--metrics-url" not in get(console.url + "/").body
            produce(broker.bootstrap_servers, "busy", ["x"] * 50)
            wait_for(lambda: console.state.metric_history[-1].values["messages_in"] == 50,
                     "a sample after the produce")
            page = get(console.url + "/").body
            assert page.count("<polyline") == 4, page
            peak = re.search(r"Messages in / s</strong> <span class=\"muted\">now [^,]+, "
                             r"peak ([0-9.]+)", page)
            assert peak and float(peak.group(1)) > 0
        finally:
            console.close()
        # A broker without the endpoint: the page says how to add the charts.
        plain = RunningConsole(broker.bootstrap_servers)
        try:
            assert "--metrics-url" in get(plain.url + "/").body
        finally:
            plain.close()


def test_acls_on_a_secured_cluster() -> None:
    with Broker(sasl=True, acls=True) as broker:
        security = ClientSecurity.from_properties({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                f'required username="admin" password="{ADMIN_PASSWORD}";'})
        console = RunningConsole(broker.bootstrap_servers, security=security)
        try:
            acl = {"resource_type": "TOPIC", "name": "orders", "pattern_type": "LITERAL",
                   "principal": "User:alice", "host": "*", "operation": "READ",
                   "permission": "ALLOW"}
            assert "No ACLs." in get(console.url + "/acls").body
            reply = post(console.url + "/acls", acl)
            assert query(reply) == {"ok": "ACL created"}
            assert "<td>User:alice</td>" in reply.body
            reply = post(console.url + "/acls/delete", acl)
            assert query(reply) == {"ok": "ACL deleted"}
            assert "No ACLs." in reply.body
        finally:
            console.close()


def test_acls_page_without_an_authorizer_says_so() -> None:
    with Broker() as broker:
        console = RunningConsole(broker.bootstrap_servers)
        try:
            page = get(console.url + "/acls")
            assert page.status == 200
            assert "The cluster did not list its ACLs" in page.body
        finally:
            console.close()


def test_the_console_reconnects_after_the_broker_restarts(tmp_path: Path) -> None:
    port = free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    with Broker(data_dir=str(tmp_path), **settings) as broker:
        broker.create_topic("durable")
        console = RunningConsole(broker.bootstrap_servers)
    try:
        down = get(console.url + "/topics")
        assert down.status == 502 and "Cannot reach the cluster" in down.body
        with Broker(data_dir=str(tmp_path), **settings):
            back = wait_for(lambda: (r := get(console.url + "/topics")).status == 200 and r,
                            "the console to reconnect")
            assert "durable" in back.body
    finally:
        console.close()

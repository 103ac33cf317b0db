"""The console on a three-node cluster (a process per node): the overview
shows every broker, the metadata quorum's voters, and partitions going
under-replicated when a node dies; a topic made from the page has its
replicas on every node; metric charts come from all three endpoints."""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.testing.cluster import LocalCluster
from tests.integration.console.support import RunningConsole, get, post, query, wait_for
from tests.support.cluster import running

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, controllers=3, metrics=True, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000",
        "replica.lag.time.max.ms": "3000"})
    with running(c):
        yield c


def _up(url: str) -> bool:
    try:
        return get(url, timeout=2).status == 200
    except OSError:
        return False


def _card(page: str, label: str) -> int:
    match = re.search(r'<div class="num">(\d+)</div><div>' + re.escape(label), page)
    assert match, label
    return int(match.group(1))


def test_overview_and_topic_pages_of_a_three_node_cluster(cluster: LocalCluster) -> None:
    urls = [cluster.metrics_url(i) for i in cluster.nodes]
    for i in cluster.nodes:
        wait_for(lambda i=i: _up(cluster.metrics_url(i, "/readyz")), f"node {i} ready", 90)
    console = RunningConsole(cluster.bootstrap, sample_interval_s=0.5, metrics_urls=urls)
    try:
        overview = wait_for(lambda: (p := get(console.url + "/")).status == 200
                            and _card(p.body, "brokers") == 3 and p, "three brokers", 90)
        assert overview.body.count("<td>voter</td>") + overview.body.count(
            "<td>leader</td>") == 3
        assert "Metadata quorum" in overview.body and "Leader <strong>" in overview.body

        replies = []

        def created() -> bool:
            replies.append(r := post(console.url + "/topics", {
                "name": "spread", "partitions": "3", "replication_factor": "3"}))
            # an attempt that created the topic but answered with an error (a
            # timeout under load) is followed by one that finds it exists
            return "ok" in query(r) or "exists" in query(r).get("error", "")
        wait_for(created, "the topic created", 60)
        if "ok" in query(replies[-1]):
            assert replies[-1].url.split("?")[0].endswith("/topics/spread")
        else:
            print("console answers before the topic existed:",
                  [query(r) for r in replies[:-1]])
        page = wait_for(lambda: (p := get(console.url + "/topics/spread").body).count(
            'class="state-ok"') == 3 and p, "three partitions in sync", 60)
        rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>([\d, ]+)</td>", page)
        assert [(int(p), {int(n) for n in replicas.split(", ")}) for p, _, replicas in rows] == [
            (0, {1, 2, 3}), (1, {1, 2, 3}), (2, {1, 2, 3})]

        host, port = urllib.parse.urlsplit(console.url).netloc.split(":")
        tail = http.client.HTTPConnection(host, int(port), timeout=60)
        tail.request("GET", "/topics/spread/tail")
        stream = tail.getresponse()
        assert stream.readline().startswith(b"retry:")
        cluster.kill(3)
        wait_for(lambda: _card(get(console.url + "/").body, "under-replicated") > 0,
                 "under-replicated partitions after a node died", 90)
        # The tail follows the partitions node 3 led to their new leaders.
        values = [f"after-{p}" for p in range(3)]
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for p, v in enumerate(values):
            producer.produce("spread", v.encode(), partition=p)
        assert producer.flush(60) == 0
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            line = stream.readline()
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:])["value"])
        tail.close()
        assert sorted(seen) == values
        assert len(console.state.metric_history) > 0
        assert console.state.metric_history[-1].errors  # node 3's endpoint is gone
    finally:
        console.close()

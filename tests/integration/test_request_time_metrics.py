"""Request time split into Kafka's phases (``kafka.network:type=RequestMetrics``),
read over HTTP from a real broker's metrics endpoint while real clients
produce with acks=all and long-poll fetches: every request type the clients
sent is timed, the phases add up to the total, and the waits land in
RemoteTime."""

from __future__ import annotations

import math
import re
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from odradek.broker.net.request_metrics import PHASES
from odradek.broker.observe.request_metrics import TIME_FAMILIES
from odradek.testing import Broker
from odradek.testing.cluster import wait_for

pytestmark = pytest.mark.timeout(180)

LINE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
FETCH_WAIT_MS = 300


def scrape(url: str) -> dict[str, dict[tuple[str, ...], float]]:
    """Family name → {label values in order: value}, from one HTTP scrape."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, dict[tuple[str, ...], float]] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            labels = tuple(v for _, v in LABEL.findall(m.group(2)))
            out.setdefault(m.group(1), {})[labels] = float(m.group(3))
    return out


@pytest.mark.parametrize("writes", [
    # appends written on the event loop, each fsynced: the acks=all produce waits for it
    {"log.flush.interval.messages": "1"},
    # appends written on a writer thread: the produce's answer is deferred until written
    {"odradek.log.writer.threads": "1"},
], ids=["fsync-on-loop", "writer-thread"])
def test_requests_are_timed_by_phase_and_the_phases_add_up_to_the_total(
        writes: dict[str, str]) -> None:
    topic = f"rt-{uuid.uuid4().hex[:8]}"
    with Broker(**{"odradek.metrics.listener": "127.0.0.1:0", **writes}) as broker:
        assert broker.app.endpoint is not None and broker.app.server is not None
        url = f"http://{broker.app.endpoint.address}/metrics"
        stage = broker.app.server.request_metrics
        assert stage is not None
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                             "linger.ms": 0})
        for i in range(20):
            producer.produce(topic, value=b"v" * 100, key=str(i).encode())
            producer.poll(0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                             "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": FETCH_WAIT_MS})
        consumer.subscribe([topic])
        got = [0]

        def caught_up_and_long_polled() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got[0] += 1
            fetch_remote = stage.phases["remote"].series.get(("Fetch",))
            # with everything read, each Fetch waits fetch.wait.max.ms for more
            return got[0] >= 20 and fetch_remote is not None and (
                fetch_remote[-1] >= 3 * FETCH_WAIT_MS / 1000 * 0.8)
        try:
            wait_for("20 records read and three long polls answered",
                     caught_up_and_long_polled, 60, interval_s=0)
        finally:
            consumer.close()

        m = scrape(url)
        counted = {api for api, _ in m["kafka_network_requestmetrics_requests_total"]}
        assert {"ApiVersions", "Metadata", "Produce", "Fetch", "FindCoordinator",
                "OffsetFetch"} <= counted, counted
        # Every request type a client sent is timed, in every family.
        timed = {api for (api,) in m["kafka_network_requestmetrics_totaltimems_count"]}
        assert counted == timed, counted ^ timed
        for suffix, _, _, _ in TIME_FAMILIES:
            family = m[f"kafka_network_requestmetrics_{suffix}"]
            assert {api for api, _ in family} == counted, suffix
            assert {q for _, q in family} == {"0.5", "0.75", "0.95", "0.98", "0.99", "0.999"}
            assert all(v >= 0 and math.isfinite(v) for v in family.values()), suffix
        assert "odradek_requests_total" not in m

        # RemoteTime: a Fetch's long poll, an acks=all Produce's wait for its write.
        remote = m["kafka_network_requestmetrics_remotetimems"]
        assert remote[("Fetch", "0.99")] >= FETCH_WAIT_MS * 0.8
        assert remote[("Produce", "0.99")] > 0
        assert remote[("Metadata", "0.99")] == 0  # answered at once: no remote time

        # The phases add up to the total, per API (sums over the same requests).
        sums = m["odradek_request_time_seconds_total"]
        totals = {api: v for (api,), v in m["odradek_request_latency_seconds_sum"].items()}
        for api in counted:
            parts = [sums[(api, phase)] for phase in PHASES]
            assert all(p >= 0 for p in parts), (api, parts)
            assert math.isclose(sum(parts), totals[api], rel_tol=1e-9, abs_tol=1e-9), api
        assert sums[("Fetch", "remote")] >= 3 * FETCH_WAIT_MS / 1000 * 0.8
        assert sums[("Produce", "remote")] > 0
        # The total's quantiles are the latency histogram's, in ms.
        produce_p50 = stage.latency.quantile(0.5, "Produce") * 1000
        assert m["kafka_network_requestmetrics_totaltimems"][("Produce", "0.5")] == (
            pytest.approx(produce_p50))

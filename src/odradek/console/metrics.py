"""Charts from the brokers' own metrics: each ``--metrics-url`` (a broker's
``/metrics``, Prometheus text format 0.0.4) is scraped on the sampling
interval and a few series summed over brokers and labels:
messages in, bytes in, bytes out (counters, charted as rates) and
under-replicated partitions (a gauge)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import aiohttp

SERIES = {
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "under_replicated": "kafka_server_replicamanager_underreplicatedpartitions",
}
COUNTERS = ("messages_in", "bytes_in", "bytes_out")
MAX_BODY_BYTES = 8 << 20
"""A metrics page larger than this is not read."""


@dataclass(frozen=True, slots=True)
class MetricSample:
    at: float
    values: dict[str, float]
    """Each :data:`SERIES` key: its sum over the brokers that answered."""
    errors: list[str]


def parse(text: str) -> dict[str, float]:
    """Each :data:`SERIES` metric's total in Prometheus text: its ``topic=""``
    sample where there is one (the broker's all-topics series, as Kafka's
    BrokerTopicMetrics has), else the sum of its samples."""
    names = {v: k for k, v in SERIES.items()}
    summed = dict.fromkeys(SERIES, 0.0)
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        key = names.get(name)
        if key is None:
            continue
        try:
            rest = line[line.rindex("}") + 1:] if "}" in line else line[len(name):]
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        if 'topic=""' in line:
            totals[key] = totals.get(key, 0.0) + value
        else:
            summed[key] += value
    return {k: totals.get(k, summed[k]) for k in SERIES}


async def scrape(urls: list[str], timeout_s: float = 3.0) -> MetricSample:
    total = dict.fromkeys(SERIES, 0.0)
    errors = []
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for url in urls:
            try:
                async with session.get(url) as resp:
                    resp.raise_for_status()
                    body = await resp.content.read(MAX_BODY_BYTES)
                for k, v in parse(body.decode("utf-8", "replace")).items():
                    total[k] += v
            except (aiohttp.ClientError, TimeoutError, UnicodeError) as exc:
                errors.append(f"{url}: {exc or type(exc).__name__}")
    return MetricSample(time.time(), total, errors)


def rates(samples: list[MetricSample], key: str) -> list[tuple[float, float]]:
    """(time, value) points: per-second rates of a counter between successive
    samples (a reset, e.g. a broker restart, gives no point), a gauge as is."""
    if key not in COUNTERS:
        return [(s.at, s.values[key]) for s in samples]
    out = []
    for a, b in itertools.pairwise(samples):
        delta, dt = b.values[key] - a.values[key], b.at - a.at
        if dt > 0 and delta >= 0:
            out.append((b.at, delta / dt))
    return out

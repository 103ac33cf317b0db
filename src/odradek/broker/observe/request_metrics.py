"""Kafka's ``kafka.network:type=RequestMetrics`` families, as jmx_exporter names
them, read at scrape time from the request pipeline's ``metrics`` stage
(:mod:`odradek.broker.net.request_metrics`, which says what each phase is):

- ``kafka_network_requestmetrics_errors_total{request,error}``;
- ``kafka_network_requestmetrics_{totaltimems,requestqueuetimems,localtimems,
  remotetimems,responsequeuetimems,responsesendtimems}{request,quantile}``:
  a gauge per quantile 0.5 0.75 0.95 0.98 0.99 0.999 (a Yammer histogram's
  ``50thPercentile`` … ``999thPercentile``), in ms, estimated from the
  stage's histograms as Prometheus's ``histogram_quantile`` does;
- ``kafka_network_requestmetrics_totaltimems_count{request}``: requests timed
  (every phase times the same requests).

(``kafka_network_requestmetrics_requests_total{request,version}`` is the
stage's own counter.) A scrape walks each API's six histogram rows once per
family: one pass per row gives all six quantiles.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from odradek.common.metrics import Histogram, Labels, Registry

if TYPE_CHECKING:
    from odradek.broker.net.request_metrics import RequestMetrics
    from odradek.broker.observe.kafka_metrics import BrokerView

QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
"""The percentiles a Yammer histogram exposes (50th … 999th)."""

TIME_FAMILIES = (
    ("totaltimems", "", "TotalTimeMs", "received to answer written"),
    ("requestqueuetimems", "queue", "RequestQueueTimeMs",
     "received until the pipeline starts it (decoding, earlier requests of the connection)"),
    ("localtimems", "local", "LocalTimeMs", "the broker's own work on it"),
    ("remotetimems", "remote", "RemoteTimeMs", "waiting for others: a Fetch's long poll, a "
     "Produce's writes and acknowledgements (acks=all: the followers)"),
    ("responsequeuetimems", "response_queue", "ResponseQueueTimeMs",
     "answer decided until its writing begins (earlier answers go first)"),
    ("responsesendtimems", "send", "ResponseSendTimeMs",
     "encoding the answer and handing it to the transport"),
)
"""(jmx_exporter's family suffix, the stage's phase ("": the total), Kafka's MBean
name, what it measures)."""

Series = Iterable[tuple[Labels, float]]


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    def stage() -> RequestMetrics | None:
        server = broker.server
        return server.request_metrics if server is not None else None

    def errors() -> Series:
        family = registry.families.get("odradek_request_errors_total")
        if family is None or family.kind != "counter":
            return []
        return [(values, v) for _, _, values, v in family.samples()]

    memos: dict[str, Memo] = {}

    def time_ms(phase: str) -> Series:
        s = stage()
        if s is None:
            return []
        return quantile_series(s.latency if not phase else s.phases[phase], 1000.0,
                               memos.setdefault(phase, {}))

    def count() -> Series:
        s = stage()
        if s is None:
            return []
        return [(labels, sum(row[:-1])) for labels, row in s.latency.series.items()]

    registry.counter("kafka_network_requestmetrics_errors_total",
                     "Error codes in answers by API and error (Kafka's ErrorsPerSec)",
                     ("request", "error"), read=errors)
    for suffix, phase, mbean, what in TIME_FAMILIES:
        registry.gauge(f"kafka_network_requestmetrics_{suffix}",
                       f"Request time in ms by API, {what}; quantiles (Kafka's {mbean})",
                       ("request", "quantile"), read=functools.partial(time_ms, phase))
    registry.gauge("kafka_network_requestmetrics_totaltimems_count",
                   "Requests timed, by API (Kafka's TotalTimeMs Count)",
                   ("request",), read=count)


_Q_LABELS = tuple(str(q) for q in QUANTILES)
Memo = dict[Labels, tuple[float, list[tuple[Labels, float]]]]
"""Per series of one histogram: (its count, its quantile series) when last
estimated."""


def quantile_series(h: Histogram, scale: float, memo: Memo | None = None) -> Series:
    """``((api, "q"), value × scale)`` for each quantile of :data:`QUANTILES` of
    each series of ``h`` with observations. With ``memo``, a series with no
    new observations since the last call is not estimated again."""
    out: list[tuple[Labels, float]] = []
    for labels, row in list(h.series.items()):
        count = float(sum(row[:-1]))
        known = memo.get(labels) if memo is not None else None
        if known is not None and known[0] == count:
            out += known[1]
            continue
        api = labels[0]
        series: list[tuple[Labels, float]] = [((api, q), v * scale) for q, v in zip(
            _Q_LABELS, quantiles(h.buckets, row, QUANTILES), strict=True) if not math.isnan(v)]
        if memo is not None:
            memo[labels] = (count, series)
        out += series
    return out


def quantiles(buckets: Sequence[float], row: Sequence[float], qs: Sequence[float]
              ) -> list[float]:
    """The ``qs`` quantiles (increasing, each in [0, 1]) of a histogram row
    (:meth:`Histogram.row`: a count per bucket, +Inf last, then the sum), in one
    pass, as :meth:`Histogram.quantile` estimates each: linear within the bucket
    (from 0 for the first), the largest finite bound past it; NaN when empty;
    0 when every observation was 0 (a phase some API never spends time in)."""
    total = sum(row[:-1])
    if total == 0:
        return [math.nan] * len(qs)
    if row[-1] <= 0.0:
        return [0.0] * len(qs)
    out: list[float] = []
    i, running = 0, 0.0
    n_buckets = len(buckets)
    for q in qs:
        rank = q * total
        while i < n_buckets and not (running + row[i] >= rank and row[i] > 0):
            running += row[i]
            i += 1
        if i == n_buckets:
            out.append(buckets[-1])
            continue
        lower = buckets[i - 1] if i else 0.0
        out.append(lower + (buckets[i] - lower) * (rank - running) / row[i])
    return out

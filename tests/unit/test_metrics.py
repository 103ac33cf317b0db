"""The metrics registry and its Prometheus text rendering (odradek.common.metrics)."""

from __future__ import annotations

import math

import pytest

from odradek.common.metrics import Registry, render


def test_an_empty_registry_renders_nothing() -> None:
    assert render(Registry()) == ""


def test_counters_render_help_type_and_one_line_per_series_sorted_by_labels() -> None:
    registry = Registry()
    requests = registry.counter("odradek_requests_total", "Requests received", ("api",))
    requests.inc("Produce")
    requests.inc("Fetch", by=2)
    requests.inc("Produce")
    assert requests.get("Produce") == 2 and requests.get("Metadata") == 0
    assert render(registry) == (
        "# HELP odradek_requests_total Requests received\n"
        "# TYPE odradek_requests_total counter\n"
        'odradek_requests_total{api="Fetch"} 2\n'
        'odradek_requests_total{api="Produce"} 2\n')


def test_a_histogram_renders_cumulative_buckets_then_sum_and_count() -> None:
    registry = Registry()
    latency = registry.histogram("lat_seconds", "Latency", ("api",), buckets=(0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 3.0):
        latency.observe(value, "Fetch")
    assert latency.count("Fetch") == 4 and latency.count("Produce") == 0
    assert render(registry).splitlines()[2:] == [
        'lat_seconds_bucket{api="Fetch",le="0.1"} 2',  # 0.1 falls in le="0.1"
        'lat_seconds_bucket{api="Fetch",le="1"} 3',
        'lat_seconds_bucket{api="Fetch",le="+Inf"} 4',
        'lat_seconds_sum{api="Fetch"} 3.65',
        'lat_seconds_count{api="Fetch"} 4',
    ]


def test_a_gauge_reads_its_callable_at_each_rendering() -> None:
    registry = Registry()
    open_now = [3]
    registry.gauge("conns", "Open connections", ("listener",),
                   read=lambda: [(("PLAINTEXT",), float(open_now[0]))])
    assert render(registry).splitlines()[-1] == 'conns{listener="PLAINTEXT"} 3'
    open_now[0] = 5
    assert render(registry).splitlines()[-1] == 'conns{listener="PLAINTEXT"} 5'


def test_label_values_and_help_are_escaped() -> None:
    registry = Registry()
    registry.counter("c", 'help with \\ and\nnewline', ("v",)).inc('a"b\\c\nd')
    lines = render(registry).splitlines()
    assert lines[0] == "# HELP c help with \\\\ and\\nnewline"
    assert lines[2] == 'c{v="a\\"b\\\\c\\nd"} 1'


def test_unlabelled_series_and_special_numbers() -> None:
    registry = Registry()
    gauge = registry.gauge("g", "a gauge")
    gauge.set(math.inf)
    assert render(registry).splitlines()[-1] == "g +Inf"
    gauge.set(0.25)
    assert render(registry).splitlines()[-1] == "g 0.25"


def test_a_family_registered_twice_is_the_same_family_unless_it_differs() -> None:
    registry = Registry()
    first = registry.counter("x_total", "x", ("api",))
    assert registry.counter("x_total", "x", ("api",)) is first
    with pytest.raises(ValueError, match="already registered as a counter"):
        registry.histogram("x_total", "x", ("api",))
    with pytest.raises(ValueError, match="already registered"):
        registry.counter("x_total", "x", ("api", "error"))


def test_a_series_must_give_every_label() -> None:
    counter = Registry().counter("e_total", "errors", ("api", "error"))
    with pytest.raises(ValueError, match="labels"):
        counter.inc("Produce")


def test_buckets_must_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        Registry().histogram("h", "h", buckets=(1.0, 0.5))

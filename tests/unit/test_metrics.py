"""The metrics registry and its Prometheus text rendering (odradek.common.metrics)."""

from __future__ import annotations

import math

import pytest

from odradek.common.metrics import Registry, render, render_openmetrics


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


def test_a_counter_reads_totals_kept_elsewhere_at_each_rendering() -> None:
    totals = {"t": 3.0}
    registry = Registry()
    registry.counter("x_total", "X", ("topic",),
                     read=lambda: [((k,), v) for k, v in totals.items()])
    assert 'x_total{topic="t"} 3\n' in render(registry)
    totals["t"] = 5.0
    assert 'x_total{topic="t"} 5\n' in render(registry)


def test_openmetrics_names_a_counter_family_without_total_and_ends_with_eof() -> None:
    registry = Registry()
    registry.counter("odradek_requests_total", "Requests", ("api",)).inc("Produce")
    registry.gauge("up_things", "Things").set(2)
    text = render_openmetrics(registry)
    assert text == (
        "# HELP odradek_requests Requests\n"
        "# TYPE odradek_requests counter\n"
        'odradek_requests_total{api="Produce"} 1\n'
        "# HELP up_things Things\n"
        "# TYPE up_things gauge\n"
        "up_things 2\n"
        "# EOF\n")
    assert render_openmetrics(Registry()) == "# EOF\n"


def test_histogram_quantiles_interpolate_within_their_bucket() -> None:
    registry = Registry()
    h = registry.histogram("lat_seconds", "L", ("api",), buckets=(0.1, 0.2, 0.4))
    assert math.isnan(h.quantile(0.5, "Produce"))
    for v in (0.05, 0.15, 0.15, 0.3):
        h.observe(v, "Produce")
    assert h.quantile(0.25, "Produce") == pytest.approx(0.1)   # the first bucket's top
    assert h.quantile(0.5, "Produce") == pytest.approx(0.15)   # halfway into (0.1, 0.2]
    assert h.quantile(1.0, "Produce") == pytest.approx(0.4)
    h.observe(9.0, "Produce")                                  # past the last bound
    assert h.quantile(1.0, "Produce") == pytest.approx(0.4)


def test_openmetrics_escapes_quotes_in_help() -> None:
    registry = Registry()
    registry.gauge("g", 'all topics: topic=""').set(1)
    assert '# HELP g all topics: topic=\\"\\"\n' in render_openmetrics(registry)
    assert '# HELP g all topics: topic=""\n' in render(registry)

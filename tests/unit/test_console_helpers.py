"""The web console's pure parts: the metrics text parser and rates, the SVG
chart scaling, and how the message browser shows and matches records."""

from __future__ import annotations

from odradek.console import metrics
from odradek.console.charts import HEIGHT, PAD, WIDTH, line_chart
from odradek.console.messages import MAX_SHOWN_BYTES, matches, pretty, text
from odradek.wire.records import Record

PAGE = """# HELP kafka_server_brokertopicmetrics_messagesin_total records in
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic=""} 30
kafka_server_brokertopicmetrics_messagesin_total{topic="a"} 10
kafka_server_brokertopicmetrics_messagesin_total{topic="b"} 20
kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 1000
kafka_server_brokertopicmetrics_bytesin_total{topic="b"} 500
kafka_server_replicamanager_underreplicatedpartitions 2
kafka_server_replicamanager_underreplicatedpartitions_other 99
kafka_server_brokertopicmetrics_bytesout_total{topic=""} not-a-number
"""


def test_parse_takes_the_all_topics_series_else_sums() -> None:
    assert metrics.parse(PAGE) == {"messages_in": 30.0, "bytes_in": 1500.0,
                                   "bytes_out": 0.0, "under_replicated": 2.0}


def _sample(at: float, messages: float, urp: float = 0.0) -> metrics.MetricSample:
    return metrics.MetricSample(at, {"messages_in": messages, "bytes_in": 0.0,
                                     "bytes_out": 0.0, "under_replicated": urp}, [])


def test_rates_of_counters_skip_resets_and_gauges_are_as_is() -> None:
    samples = [_sample(0, 0), _sample(2, 10, 1), _sample(4, 30), _sample(5, 5, 3)]
    assert metrics.rates(samples, "messages_in") == [(2, 5.0), (4, 10.0)]
    assert metrics.rates(samples, "under_replicated") == [(0, 0.0), (2, 1.0), (4, 0.0),
                                                          (5, 3.0)]


def test_line_chart_scales_into_the_box() -> None:
    chart = line_chart("lag", [(100.0, 0.0), (110.0, 50.0), (120.0, 100.0)])
    points = [tuple(map(float, p.split(","))) for p in chart.points.split()]
    assert points[0] == (PAD, HEIGHT - PAD)
    assert points[-1] == (WIDTH - PAD, PAD)
    assert chart.latest == "100" and chart.peak == "100"
    assert "3 samples" in chart.span
    assert line_chart("empty", []).points == ""
    both = line_chart("lag", [(0.0, 10.0), (10.0, 10.0)], {"t-0": [(0.0, 20.0), (10.0, 5.0)]})
    (label, other), = both.others
    assert label == "t-0"
    assert other.split()[0] == f"{PAD:.1f},{PAD:.1f}"  # the highest value of all at the top
    assert both.points.split()[0].endswith(f",{HEIGHT / 2:.1f}")
    flat = line_chart("one", [(1.0, 7.0)]).points.split()
    assert len(flat) == 2 and flat[0].split(",")[1] == flat[1].split(",")[1]


def test_values_are_shown_as_text_json_or_hex() -> None:
    assert text(None) is None
    assert text(b"plain") == "plain"
    assert text(b"\xff\x00") == "0xff00"
    assert text(b"a" * (MAX_SHOWN_BYTES + 5)).endswith(f"… ({MAX_SHOWN_BYTES + 5} bytes)")
    assert pretty('{"a": [1, 2]}') == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert pretty("[1") is None and pretty("42") is None and pretty(None) is None


def test_matches_key_value_and_headers() -> None:
    r = Record(0, 0, b"user-7", b"paid 10 EUR", (("trace", b"abc"), ("empty", None)))
    assert matches(r, b"user-7") and matches(r, b"10 EUR")
    assert matches(r, b"trace") and matches(r, b"abc")
    assert not matches(r, b"USD")
    assert matches(Record(0, 0, None, None), b"")

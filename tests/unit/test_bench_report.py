"""The benchmark suite's table: medians, ranges and ratios against each baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def _report() -> ModuleType:
    path = Path(__file__).parents[2] / "benchmarks" / "report.py"
    spec = importlib.util.spec_from_file_location("bench_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_shows_median_range_and_ratios() -> None:
    report = _report()
    r = report.Results()
    for v in (700_000, 750_000, 720_000):
        r.add("Produce", "100 B, 1p", "odradek", v, "msg/s")
    for v in (800_000, 600_000, 900_000):
        r.add("Produce", "100 B, 1p", "mock", v, "msg/s")
    r.add("Produce", "100 B, 1p", "redis", 144_000, "msg/s")
    r.add("Latency", "p99", "odradek", 4.5, "ms", higher_is_better=False)
    r.notes.append("NATS not measured")
    text = report.markdown(r, "# run")
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| config"))
    assert header == ("| config | Odradek | librdkafka mock | Redis Streams | "
                      "Odradek / librdkafka mock | Odradek / Redis Streams |")
    row = next(line for line in lines if line.startswith("| 100 B, 1p"))
    # medians 720k and 800k: ratio 0.90; 720k / 144k = 5.00
    assert row == "| 100 B, 1p | 720k (700k–750k) | 800k (600k–900k) | 144k | 0.90 | 5.00 |"
    assert "### Latency (ms, lower is better)" in text
    assert "| p99 | 4.50 |" in text
    assert text.rstrip().endswith("- NATS not measured")

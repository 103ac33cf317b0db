"""The two pipelines of ``pipelines/`` end to end, against ground truth in Python.

Events carry fixed timestamps over five minutes, then one late-stamped event
moves the watermark past all five windows; an AvailableNow run must then
emit every window exactly once with the counts Python computes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipelines import generate, log_aggregation, website_activity
from tests.spark.helpers import create_topic, produce, read_all, topic_name

pytestmark = pytest.mark.spark

BASE = 1_800_000_000_000 - 1_800_000_000_000 % 300_000  # a multiple of 5 minutes
MINUTE = 60_000


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _events(make: Any, n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [make(rng, BASE + rng.randrange(5 * MINUTE)) for _ in range(n)]


def _run(module: Any, args: list[str], spark: Any) -> None:
    for query in module.build(spark, module.parser().parse_args(args)):
        query.awaitTermination(300)
        assert query.exception() is None


def test_website_activity_counts_views_per_page_per_minute(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("pageviews"), 3)
    sink = create_topic(bootstrap, topic_name("per-minute"), 2)
    events = _events(generate.pageviews, 3000, seed=1)
    flush = {"ts": BASE + 10 * MINUTE, "page": "/", "user": "flush"}
    produce(bootstrap, source, ({"value": json.dumps(e).encode()} for e in [*events, flush]))
    truth = Counter((_iso(e["ts"] - e["ts"] % MINUTE), e["page"]) for e in events)

    _run(website_activity, [
        "--bootstrap", bootstrap, "--input-topic", source, "--output-topic", sink,
        "--output-dir", str(tmp_path / "parquet"), "--checkpoint", str(tmp_path / "cp"),
        "--available-now",
    ], spark)

    from_topic = [json.loads(v) for _, _, v in read_all(bootstrap, sink, 2)]
    assert len(from_topic) == len(truth)  # each window once
    assert Counter({(r["window_start"], r["page"]): r["views"] for r in from_topic}) == truth
    files = spark.read.parquet(str(tmp_path / "parquet")).collect()
    assert Counter({(r.window_start.strftime("%Y-%m-%dT%H:%M:%SZ"), r.page): r.views
                    for r in files}) == truth
    assert len(files) == len(truth)


def test_log_aggregation_alerts_on_error_rate(spark: Any, kafka: Any, tmp_path: Path) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("logs"), 3)
    sink = create_topic(bootstrap, topic_name("alerts"), 1)
    lines = _events(generate.log_line, 5000, seed=2)
    flush = {"ts": BASE + 10 * MINUTE, "service": "api", "level": "INFO", "message": "flush"}
    produce(bootstrap, source, ({"value": json.dumps(e).encode()} for e in [*lines, flush]))
    totals: Counter[tuple[str, str]] = Counter()
    errors: Counter[tuple[str, str]] = Counter()
    for e in lines:
        key = (_iso(e["ts"] - e["ts"] % MINUTE), e["service"])
        totals[key] += 1
        errors[key] += e["level"] == "ERROR"
    expected = {k: (totals[k], errors[k]) for k in totals
                if errors[k] / totals[k] >= 0.1 and totals[k] >= 20}
    assert expected, "the generator should have produced incidents"
    assert len(expected) < len(totals), "and healthy windows"

    _run(log_aggregation, [
        "--bootstrap", bootstrap, "--input-topic", source, "--alerts-topic", sink,
        "--checkpoint", str(tmp_path / "cp"), "--threshold", "0.1", "--min-lines", "20",
        "--available-now",
    ], spark)

    alerts = [json.loads(v) for _, _, v in read_all(bootstrap, sink, 1)]
    got = {(a["window_start"], a["service"]): (a["lines"], a["errors"]) for a in alerts}
    assert len(alerts) == len(got)
    assert got == expected
    assert all(a["error_rate"] == round(a["errors"] / a["lines"], 4) for a in alerts)


@pytest.mark.slow
def test_pipeline_runs_under_spark_submit(kafka: Any, tmp_path: Path) -> None:
    submit = shutil.which("spark-submit")
    if submit is None:
        pytest.skip("spark-submit is not on PATH")
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("submit-logs"), 1)
    sink = create_topic(bootstrap, topic_name("submit-alerts"), 1)
    lines = [{"ts": BASE + i * 1000, "service": "billing", "level": "ERROR" if i % 2 else "INFO",
              "message": "m"} for i in range(60)]
    lines.append({"ts": BASE + 10 * MINUTE, "service": "billing", "level": "INFO", "message": "f"})
    produce(bootstrap, source, ({"value": json.dumps(e).encode()} for e in lines))
    script = Path(__file__).parents[2] / "pipelines" / "log_aggregation.py"
    proc = subprocess.run(
        [submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(script),
         "--bootstrap", bootstrap, "--input-topic", source, "--alerts-topic", sink,
         "--checkpoint", str(tmp_path / "cp"), "--available-now"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (alert,) = [json.loads(v) for _, _, v in read_all(bootstrap, sink, 1)]
    assert (alert["service"], alert["lines"], alert["errors"]) == ("billing", 60, 30)

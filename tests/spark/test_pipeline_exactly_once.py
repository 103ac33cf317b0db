"""``pipelines/log_aggregation.py --exactly-once`` end to end, with a rerun batch.

The pipeline runs, then its last micro-batch (the one that emits the closed
windows' alerts) is made to look uncommitted in the checkpoint, as after a
driver crash between the Kafka commit and Spark's, and the pipeline runs
again: Spark reruns that batch. With ``--exactly-once`` a read_committed
reader still sees every alert once; the at-least-once sink, run the same way,
writes them twice (which shows the rerun really happens).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipelines import generate, log_aggregation
from tests.spark.helpers import create_topic, produce, topic_name
from tests.spark.test_sink_exactly_once import read_committed

pytestmark = pytest.mark.spark

BASE = 1_800_000_000_000 - 1_800_000_000_000 % 300_000
MINUTE = 60_000


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(args: list[str], spark: Any) -> list[Any]:
    queries = log_aggregation.build(spark, log_aggregation.parser().parse_args(args))
    for query in queries:
        query.awaitTermination(300)
        assert query.exception() is None
    return queries


def _forget_last_commit(checkpoint: Path) -> int:
    """Delete the checkpoint's last commits/ entry: Spark reruns that batch."""
    last = max(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    return last


def test_log_aggregation_exactly_once_survives_a_rerun(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("eos-logs"), 2)
    rng = random.Random(3)
    lines = [generate.log_line(rng, BASE + rng.randrange(5 * MINUTE)) for _ in range(3000)]
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

    def alerts(topic: str) -> list[tuple[tuple[str, str], tuple[int, int]]]:
        got = [json.loads(v) for v in read_committed(bootstrap, topic, 1)]
        return sorted(((a["window_start"], a["service"]), (a["lines"], a["errors"]))
                      for a in got)

    for exactly_once in (True, False):
        sink = create_topic(bootstrap, topic_name("eos-alerts"), 1)
        checkpoint = tmp_path / f"cp-{exactly_once}"
        args = ["--bootstrap", bootstrap, "--input-topic", source, "--alerts-topic", sink,
                "--checkpoint", str(checkpoint), "--threshold", "0.1", "--min-lines", "20",
                "--available-now"]
        if exactly_once:
            args += ["--exactly-once", "--transactional-id-prefix", topic_name("eos-alerts")]
        _run(args, spark)
        assert alerts(sink) == sorted(expected.items())

        last = _forget_last_commit(checkpoint)
        (query,) = _run(args, spark)
        assert [p["batchId"] for p in query.recentProgress] == [last]  # the rerun, only
        if exactly_once:
            assert alerts(sink) == sorted(expected.items())
        else:
            assert alerts(sink) == sorted([*expected.items(), *expected.items()])

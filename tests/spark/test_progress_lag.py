"""A streaming query's lag in its progress: what a Python data source can report
(``latestOffset``, not ``metrics``) and Kafka's offsets-behind-latest numbers
computed from it, with a real local SparkSession and a real broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.spark.progress import offsets_behind_latest
from tests.spark.helpers import create_topic, produce, topic_name

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BACKLOG = {0: 60, 1: 30}


def parsed(offset: Any) -> Any:
    """A source offset of a progress: pyspark 4.3 gives the JSON text in
    ``recentProgress`` (the progress's ``json`` has it parsed)."""
    return json.loads(offset) if isinstance(offset, str) else offset


def test_progress_reports_the_latest_offsets_and_the_lag_behind_them(
    spark: Any, kafka: Any, tmp_path: Any
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("lag-progress"), len(BACKLOG))
    produce(bootstrap, topic, ({"value": b"v", "partition": p}
                               for p, n in BACKLOG.items() for _ in range(n)))
    query = (spark.readStream.format("odradek")
             .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30")
             .option("commitOffsetsToGroup", "false").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert sum(p["numInputRows"] for p in batches) == sum(BACKLOG.values())
    assert len(batches) == 3  # 30 records a batch
    latest = {topic: {str(p): n for p, n in BACKLOG.items()}}
    lags = []
    for progress in batches:
        (source,) = progress["sources"]
        # What Spark allows a Python source: latestOffset, and no custom metrics.
        assert parsed(source["latestOffset"]) == latest
        assert not source.get("metrics")
        end = parsed(source["endOffset"])[topic]
        behind = [BACKLOG[int(p)] - end[p] for p in end]
        lag = offsets_behind_latest(source)
        assert lag == {"avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
                       "maxOffsetsBehindLatest": str(max(behind)),
                       "minOffsetsBehindLatest": str(min(behind))}
        # The offsets parsed, as a progress's JSON has them, give the same.
        as_json = {k: parsed(source[k]) for k in ("latestOffset", "endOffset")}
        assert offsets_behind_latest(as_json) == lag
        lags.append(lag)
    # 60 of 90 records left after the first batch, over 2 partitions, unevenly
    assert lags[0]["avgOffsetsBehindLatest"] == "30.0"
    assert int(lags[0]["maxOffsetsBehindLatest"]) > int(lags[0]["minOffsetsBehindLatest"])
    assert lags[-1] == {"avgOffsetsBehindLatest": "0.0", "maxOffsetsBehindLatest": "0",
                        "minOffsetsBehindLatest": "0"}

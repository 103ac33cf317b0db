"""Streaming reads and writes of format("odradek") against a real broker."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.spark.offsets import rate_limit
from tests.spark.helpers import create_topic, produce, read_all, topic_name, wait_for

pytestmark = pytest.mark.spark


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def to_memory(df: Any, name: str, tmp_path: Any, available_now: bool = True) -> Any:
    w = (df.writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / name)))
    w = (w.trigger(availableNow=True) if available_now
         else w.trigger(processingTime="100 milliseconds"))
    return w.start()


def to_parquet(df: Any, name: str, tmp_path: Any) -> Any:
    """An AvailableNow query whose checkpoint can be restarted (unlike memory's)."""
    return (df.writeStream.format("parquet").option("path", str(tmp_path / f"{name}-out"))
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True).start())


def batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_max_offsets_per_trigger_gives_proportional_batches(
    spark: Any, kafka: Any, tmp_path: Any
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("rate"), 4)
    backlog = {0: 40, 1: 20, 2: 10, 3: 1}
    produce(bootstrap, topic, ({"value": f"{p}:{i}".encode(), "partition": p}
                               for p, n in backlog.items() for i in range(n)))
    query = to_memory(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                             maxOffsetsPerTrigger="15"), "rate", tmp_path)
    query.awaitTermination(180)
    # what Kafka's proportional split gives, batch after batch
    expected, start = [], {(topic, p): 0 for p in backlog}
    latest = {(topic, p): n for p, n in backlog.items()}
    while start != latest:
        end = rate_limit(start, latest, 15)
        expected.append(sum(end[tp] - start[tp] for tp in end))
        start = end
    assert batch_sizes(query) == expected
    assert max(expected) <= 15 and len(expected) > 4
    got = sorted((r.partition, r.offset) for r in spark.sql("select * from rate").collect())
    assert got == [(p, o) for p, n in backlog.items() for o in range(n)]


def test_available_now_reads_what_exists_at_start_and_stops(
    spark: Any, kafka: Any, tmp_path: Any
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("now"), 2)
    produce(bootstrap, topic, ({"value": f"a{i}".encode(), "partition": i % 2}
                               for i in range(500)))
    query = to_parquet(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                              maxOffsetsPerTrigger="200"), "now1", tmp_path)
    query.awaitTermination(180)
    assert not query.isActive
    assert batch_sizes(query) == [200, 200, 100]
    produce(bootstrap, topic, ({"value": f"b{i}".encode(), "partition": 0} for i in range(30)))
    # a restart from the same checkpoint reads only what came since
    again = to_parquet(stream(spark, bootstrap, subscribe=topic), "now1", tmp_path)
    again.awaitTermination(180)
    assert sum(batch_sizes(again)) == 30
    got = sorted((r.partition, r.offset, bytes(r.value))
                 for r in spark.read.parquet(str(tmp_path / "now1-out")).collect())
    assert got == read_all(bootstrap, topic, 2)
    assert got[250:280] == [(0, 250 + i, f"b{i}".encode()) for i in range(30)]


def test_starting_offsets_json_in_a_stream(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("sjson"), 2)
    produce(bootstrap, topic, ({"value": b"x", "partition": p} for p in range(2)
                               for _ in range(20)))
    query = to_memory(stream(spark, bootstrap, subscribe=topic, startingOffsets=json.dumps(
        {topic: {"0": 15, "1": -2}})), "sjson", tmp_path)
    query.awaitTermination(180)
    got = sorted((r.partition, r.offset) for r in spark.sql("select * from sjson").collect())
    assert got == [(0, o) for o in range(15, 20)] + [(1, o) for o in range(20)]


def test_latest_start_reads_only_new_records(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("latest"), 1)
    produce(bootstrap, topic, ({"value": b"old"} for _ in range(10)))
    query = to_memory(stream(spark, bootstrap, subscribe=topic), "latest", tmp_path,
                      available_now=False)
    try:
        wait_for(lambda: query.lastProgress is not None, 120, "the first micro-batch")
        produce(bootstrap, topic, ({"value": b"new"} for _ in range(5)))
        wait_for(lambda: spark.sql("select count(*) c from latest").first().c == 5, 120,
                 "the five new records")
    finally:
        query.stop()
    assert {bytes(r.value) for r in spark.sql("select value from latest").collect()} == {b"new"}


def test_progress_is_committed_to_a_consumer_group(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("lag"), 2)
    produce(bootstrap, topic, ({"value": b"x", "partition": i % 2} for i in range(400)))
    group = f"spark-{topic}"
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="100", **{"kafka.group.id": group})
    to_parquet(df, "lag", tmp_path).awaitTermination(180)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def committed() -> dict[int, int]:
        f = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in (0, 1)])]
        )[group]
        return {tp.partition: tp.offset for tp in f.result(30).topic_partitions}

    # every completed batch is committed, the last one included: lag 0
    assert committed() == {0: 200, 1: 200}
    produce(bootstrap, topic, ({"value": b"y", "partition": 0} for _ in range(30)))
    to_parquet(df, "lag", tmp_path).awaitTermination(180)
    assert committed() == {0: 230, 1: 200}
    # and the operator sees it, lag included
    out = subprocess.run(["odradek", "groups", "describe", group, "--bootstrap-server",
                          bootstrap, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)
    lags = {(o["topic"], o["partition"]): (o["current_offset"], o["lag"])
            for o in described["partitions"]}
    assert lags == {(topic, 0): (230, 0), (topic, 1): (200, 0)}


def test_no_commit_when_opted_out(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("nolag"), 1)
    produce(bootstrap, topic, ({"value": b"x"} for _ in range(50)))
    group = f"spark-{topic}"
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="10", commitOffsetsToGroup="false",
                **{"kafka.group.id": group})
    to_memory(df, "nolag", tmp_path).awaitTermination(180)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    groups = admin.list_consumer_groups().result(30).valid
    assert group not in {g.group_id for g in groups}


def test_stream_write_to_a_topic(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("src"), 2)
    sink = create_topic(bootstrap, topic_name("sink"), 3)
    produce(bootstrap, source, ({"value": f"v{i}".encode(), "key": f"k{i}".encode(),
                                 "partition": i % 2} for i in range(300)))
    out = stream(spark, bootstrap, subscribe=source, startingOffsets="earliest").selectExpr(
        "key", "upper(cast(value as string)) as value"
    )
    query = (out.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "w"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    values = sorted(v for _, _, v in read_all(bootstrap, sink, 3))
    assert values == sorted(f"V{i}".encode() for i in range(300))


def test_min_offsets_wait_for_records_or_the_delay(spark: Any, kafka: Any, tmp_path: Any) -> None:
    from datetime import datetime

    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("minrows"), 1)
    produce(bootstrap, topic, ({"value": b"a"} for _ in range(10)))
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="100", maxTriggerDelay="8s")
    query = to_memory(df, "minrows", tmp_path, available_now=False)

    def count() -> int:
        return int(spark.sql("select count(*) c from minrows").first().c)

    def started(batch: int) -> float:
        (p,) = [p for p in query.recentProgress if p["batchId"] == batch]
        return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()

    try:
        wait_for(lambda: count() == 10, 120, "the first batch (the delay starts expired)")
        produce(bootstrap, topic, ({"value": b"b"} for _ in range(10)))
        wait_for(lambda: count() == 20, 120, "the small backlog after maxTriggerDelay")
        # 10 < 100 records: the batch waited for maxTriggerDelay since the last one
        assert started(1) - started(0) >= 7.9
        produce(bootstrap, topic, ({"value": b"c"} for _ in range(150)))
        wait_for(lambda: count() == 170, 120, "a backlog above minOffsetsPerTrigger")
        # enough records: no waiting for the delay
        assert started(2) - started(1) < 7.9
    finally:
        query.stop()


def test_pattern_picks_up_topics_created_while_running(
    spark: Any, kafka: Any, tmp_path: Any
) -> None:
    bootstrap = kafka.bootstrap_servers
    prefix = topic_name("grow").replace("-", "")
    first = create_topic(bootstrap, f"{prefix}-a", 1)
    produce(bootstrap, first, ({"value": b"a"} for _ in range(5)))
    df = stream(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    query = to_memory(df, "grow", tmp_path, available_now=False)

    def seen() -> dict[str, int]:
        rows = spark.sql("select topic, count(*) c from grow group by topic").collect()
        return {r.topic: r.c for r in rows}

    try:
        wait_for(lambda: seen() == {first: 5}, 120, "the first topic's records")
        second = create_topic(bootstrap, f"{prefix}-b", 2)
        produce(bootstrap, second, ({"value": b"b", "partition": i % 2} for i in range(8)))
        # a partition found mid-stream starts at its earliest offset, as in Kafka's source
        wait_for(lambda: seen() == {first: 5, second: 8}, 120, "the new topic's records")
    finally:
        query.stop()

"""format("odradek") with a real local SparkSession against a real broker."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.spark.helpers import create_topic, produce, read_all, topic_name

pytestmark = pytest.mark.spark


def reader(spark: Any, bootstrap: str, stream: bool = False, **options: str) -> Any:
    r = (spark.readStream if stream else spark.read).format("odradek")
    r = r.option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows(df: Any) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def fill(bootstrap: str, prefix: str, partitions: int, per_partition: int) -> str:
    topic = create_topic(bootstrap, topic_name(prefix), partitions)
    produce(bootstrap, topic, ({"value": f"{p}:{i}".encode(), "key": f"k{i}".encode(),
                                "partition": p}
                               for i in range(per_partition) for p in range(partitions)))
    return topic


def test_schema_is_sparks_kafka_schema(spark: Any, kafka: Any) -> None:
    topic = fill(kafka.bootstrap_servers, "schema", 1, 3)
    df = reader(spark, kafka.bootstrap_servers, subscribe=topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    with_headers = reader(spark, kafka.bootstrap_servers, subscribe=topic, includeHeaders="true")
    assert with_headers.schema.fields[-1].dataType.simpleString() == (
        "array<struct<key:string,value:binary>>"
    )
    first = df.orderBy("offset").first()
    assert (bytes(first.key), bytes(first.value), first.topic, first.timestampType) == (
        b"k0", b"0:0", topic, 0
    )
    # no transactions are open, so read_committed sees every record too
    committed = reader(spark, kafka.bootstrap_servers, subscribe=topic,
                       **{"kafka.isolation.level": "read_committed"})
    assert committed.count() == 3


def test_batch_read_of_exact_ranges(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = fill(bootstrap, "ranges", 3, 50)
    df = reader(
        spark, bootstrap, subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": 45}}),
        endingOffsets=json.dumps({topic: {"0": 20, "1": 5, "2": -1}}),
    )
    expected = ([(0, o, f"0:{o}".encode()) for o in range(10, 20)]
                + [(1, o, f"1:{o}".encode()) for o in range(0, 5)]
                + [(2, o, f"2:{o}".encode()) for o in range(45, 50)])
    assert rows(df) == expected
    partial = reader(spark, bootstrap, subscribe=topic,
                     startingOffsets=json.dumps({topic: {"0": 10, "1": 0}}))
    with pytest.raises(Exception, match=f"must list every partition.*missing {topic}-2"):
        partial.collect()
    # minPartitions splits ranges into more tasks and still reads each offset once
    split = reader(spark, bootstrap, subscribe=topic, minPartitions="7")
    assert split.rdd.getNumPartitions() >= 7
    assert rows(split) == read_all(bootstrap, topic, 3)


def test_assign_and_pattern_subscriptions(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    a = fill(bootstrap, "patt-a", 2, 4)
    b = fill(bootstrap, "patt-b", 1, 4)
    assigned = reader(spark, bootstrap, assign=json.dumps({a: [1], b: [0]}))
    assert sorted((r.topic, r.partition) for r in assigned.collect()) == sorted(
        [(a, 1)] * 4 + [(b, 0)] * 4
    )
    prefix = a.split("-")[0]
    pattern = reader(spark, bootstrap, subscribePattern=f"{prefix}-.*")
    topics = {r.topic for r in pattern.select("topic").distinct().collect()}
    assert {a, b} <= topics


def test_write_then_read_back_with_headers(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("written"), 2)
    data = [
        ("k1", "v1", 0, [("h1", b"a"), ("h2", b"b")]),
        ("k2", "v2", 1, None),
        (None, "v3", 1, [("h3", None)]),
    ]
    df = spark.createDataFrame(
        data, "key string, value string, partition int, "
              "headers array<struct<key:string,value:binary>>",
    )
    (df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).mode("append").save())
    back = reader(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()
    got = [
        (None if r.key is None else bytes(r.key).decode(), bytes(r.value).decode(), r.partition,
         None if r.headers is None else [(h.key, None if h.value is None else bytes(h.value))
                                         for h in r.headers])
        for r in back
    ]
    assert sorted(got, key=repr) == sorted(data, key=repr)


def test_writer_checks_columns_and_mode(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    df = spark.createDataFrame([("a",)], "v string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        (df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "x").mode("append").save())
    ok = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="'topic' option or a 'topic' column"):
        ok.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode(
            "append").save()
    with pytest.raises(Exception, match="only appends"):
        (ok.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "x").mode("overwrite").save())


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of the options 'assign', 'subscribe' or 'subscribePattern'"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options"),
    ({"subscribe": "a", "startingOffsets": "{nope"}, "startingOffsets' is not valid JSON"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "manages it itself"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "ten"}, "must be an integer"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
    ({"assign": '{"a":[0,1]}', "startingOffsets": '{"a":{"0":1}}'},
     "must list every assigned partition"),
])
def test_invalid_options_fail_at_load(
    spark: Any, kafka: Any, options: dict[str, str], message: str
) -> None:
    for stream in (False, True):
        with pytest.raises(Exception, match=re.escape(message)):
            reader(spark, kafka.bootstrap_servers, stream=stream, **options)


def test_mode_specific_options_fail_before_reading(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    with pytest.raises(Exception, match=r"'kafka\.bootstrap\.servers' must be specified"):
        spark.read.format("odradek").option("subscribe", "a").load()
    with pytest.raises(Exception, match="'latest' is not valid for batch"):
        reader(spark, bootstrap, subscribe="a", startingOffsets="latest").collect()
    stream = reader(spark, bootstrap, stream=True, subscribe="a", endingOffsets="latest")
    query = (stream.writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    with pytest.raises(Exception, match="not valid in streaming queries"):
        query.awaitTermination(120)


def test_starting_offsets_by_timestamp(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("stamps"), 2)
    base = 1_700_000_000_000
    produce(bootstrap, topic, ({"value": f"{p}:{i}".encode(), "partition": p,
                                "timestamp": base + i * 1000}
                               for p in range(2) for i in range(10)))
    df = reader(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 7000))
    assert rows(df) == [(p, o, f"{p}:{o}".encode()) for p in range(2) for o in range(7, 10)]
    assert {r.timestamp.timestamp() for r in df.collect()} == {
        (base + i * 1000) / 1000 for i in range(7, 10)
    }
    per = reader(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=json.dumps(
        {topic: {"0": base + 8000, "1": base + 2500}}
    ))
    assert rows(per) == ([(0, o, f"0:{o}".encode()) for o in range(8, 10)]
                         + [(1, o, f"1:{o}".encode()) for o in range(3, 10)])
    with pytest.raises(Exception, match="has a timestamp at or after"):
        reader(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 60_000)).collect()
    late = reader(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 60_000),
                  startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for f in futures.values():
        f.result(30)


def test_fail_on_data_loss_after_delete_records(spark: Any, kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = fill(bootstrap, "loss", 1, 100)
    _delete_records(bootstrap, topic, 0, 60)
    start = json.dumps({topic: {"0": 10}})
    with pytest.raises(Exception, match="are gone"):
        reader(spark, bootstrap, subscribe=topic, startingOffsets=start).collect()
    skipped = reader(spark, bootstrap, subscribe=topic, startingOffsets=start,
                     failOnDataLoss="false")
    assert [o for _, o, _ in rows(skipped)] == list(range(60, 100))


def test_stream_fail_on_data_loss(spark: Any, kafka: Any, tmp_path: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = fill(bootstrap, "sloss", 1, 50)
    _delete_records(bootstrap, topic, 0, 30)
    start = json.dumps({topic: {"0": 0}})

    def run(fail: str, name: str) -> Any:
        df = reader(spark, bootstrap, stream=True, subscribe=topic, startingOffsets=start,
                    failOnDataLoss=fail)
        return (df.writeStream.format("memory").queryName(name)
                .option("checkpointLocation", str(tmp_path / name))
                .trigger(availableNow=True).start())

    failing = run("true", "sloss_fail")
    with pytest.raises(Exception, match="are gone"):
        failing.awaitTermination(120)
    skipping = run("false", "sloss_skip")
    skipping.awaitTermination(120)
    got = [r.offset for r in spark.sql("select offset from sloss_skip order by offset").collect()]
    assert got == list(range(30, 50))

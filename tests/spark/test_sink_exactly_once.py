"""The sink's exactly-once mode (``exactlyOnce=true``) against a real broker.

Every count is taken by a read_committed consumer: rows of an aborted or
fenced transaction exist in the log but must never be seen.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.spark.kafka import TxnTask, book_topic, committed_batch, write_transactional
from odradek.spark.options import OptionError, parse_sink
from tests.spark.helpers import create_topic, produce, topic_name

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, scope="module")
def _close_cached_clients() -> Iterator[None]:
    """The writer keeps its bookkeeping consumer per process; close this test
    process's before the shared broker stops (else librdkafka keeps reconnecting)."""
    yield
    from odradek.spark import kafka as connector

    for consumer in connector._book_consumers.values():
        consumer.close()
    connector._book_consumers.clear()


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed consumer sees in ``topic``, sorted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-truth",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    done: set[int] = set()
    deadline = time.monotonic() + 30
    while len(done) < partitions:
        assert time.monotonic() < deadline, "reading the committed records timed out"
        for m in consumer.consume(1000, 0.5):
            if m.error():
                done.add(m.partition())
            else:
                out.append(m.value())
    consumer.close()
    return sorted(out)


def partitions_of(bootstrap: str, topic: str) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return len(meta.topics[topic].partitions)


def eos_stream(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path,
               prefix: str | None = None) -> Any:
    """An AvailableNow copy of ``source`` to ``sink``, 100 records per batch."""
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "100").load().select("key", "value"))
    w = (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", sink).option("exactlyOnce", "true")
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    if prefix is not None:
        w = w.option("transactional.id.prefix", prefix)
    return w.start()


def batches(values: list[bytes], chunk: int = 4) -> Iterator[pa.RecordBatch]:
    for i in range(0, len(values), chunk):
        yield pa.RecordBatch.from_arrays([pa.array(values[i:i + chunk], pa.binary())],
                                         names=["value"])


def test_stream_writes_each_row_once_and_a_rerun_batch_writes_nothing(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("eos-in"), 2)
    sink = create_topic(bootstrap, topic_name("eos-out"), 2)
    values = [f"row-{i}".encode() for i in range(300)]
    produce(bootstrap, source, ({"value": v, "partition": i % 2} for i, v in enumerate(values)))
    checkpoint = tmp_path / "cp"
    prefix = topic_name("eos")

    query = eos_stream(spark, bootstrap, source, sink, checkpoint, prefix)
    query.awaitTermination(120)
    assert query.exception() is None
    ran = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
    assert len(ran) == 3  # 300 records, 100 per batch
    assert read_committed(bootstrap, sink, 2) == sorted(values)
    # the markers: batch b+1 for each of the two writer partitions of the last batch
    options = parse_sink({"kafka.bootstrap.servers": bootstrap, "exactlyOnce": "true"}, True)
    last = ran[-1]
    for partition in (0, 1):
        marker = committed_batch(options, TxnTask(prefix, last, partition, str(query.id)))
        assert marker == (last + 1, str(query.id))

    # Spark's replay: the Kafka transactions of the last batch committed but the
    # checkpoint's commit did not (a driver crash in between). Restarting reruns it.
    for name in (str(last), f".{last}.crc"):  # the entry and Hadoop's checksum of it
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    again = eos_stream(spark, bootstrap, source, sink, checkpoint, prefix)
    again.awaitTermination(120)
    assert again.exception() is None
    assert again.id == query.id
    rerun = [p for p in again.recentProgress if p["numInputRows"]]
    assert [p["batchId"] for p in rerun] == [last] and rerun[0]["numInputRows"] == 100
    assert read_committed(bootstrap, sink, 2) == sorted(values)


def test_prefix_derived_from_the_query_id(spark: Any, kafka: Any, tmp_path: Path) -> None:
    bootstrap = kafka.bootstrap_servers
    source = create_topic(bootstrap, topic_name("eos-qid-in"), 1)
    sink = create_topic(bootstrap, topic_name("eos-qid-out"), 1)
    values = [f"q{i}".encode() for i in range(50)]
    produce(bootstrap, source, ({"value": v} for v in values))
    query = eos_stream(spark, bootstrap, source, sink, tmp_path / "cp")
    query.awaitTermination(120)
    assert query.exception() is None
    assert read_committed(bootstrap, sink, 1) == sorted(values)
    options = parse_sink({"kafka.bootstrap.servers": bootstrap, "exactlyOnce": "true"}, True)
    task = TxnTask(f"odradek-{query.id}", 0, 0, str(query.id))
    assert committed_batch(options, task) == (1, str(query.id))


def test_writing_the_same_batch_twice_writes_it_once(kafka: Any) -> None:
    """The writer's own replay check, without Spark: batch, partition and query
    id as Spark's task context would give them."""
    bootstrap = kafka.bootstrap_servers
    sink = create_topic(bootstrap, topic_name("eos-twice"), 1)
    options = parse_sink({"kafka.bootstrap.servers": bootstrap, "topic": sink,
                          "exactlyOnce": "true"}, True)
    prefix = topic_name("twice")
    first = [f"b0-{i}".encode() for i in range(10)]
    task = TxnTask(prefix, 0, 3, "query-a")

    done = write_transactional(options, batches(first), task)
    assert (done.rows, done.replayed) == (10, False)
    done = write_transactional(options, batches(first), task)
    assert (done.rows, done.replayed) == (0, True)
    assert read_committed(bootstrap, sink, 1) == sorted(first)

    # the next batch is written; an empty task touches nothing
    second = [f"b1-{i}".encode() for i in range(5)]
    assert not write_transactional(options, batches(second), TxnTask(prefix, 1, 3, "query-a"))\
        .replayed
    assert write_transactional(options, iter([]), TxnTask(prefix, 2, 3, "query-a")).rows == 0
    assert committed_batch(options, TxnTask(prefix, 2, 3, "query-a")) == (2, "query-a")
    # a new query (a new checkpoint) reusing the prefix starts again at batch 0:
    # its batch 0 is not a replay of the old query's
    third = [b"new-query"]
    done = write_transactional(options, batches(third), TxnTask(prefix, 0, 3, "query-b"))
    assert (done.rows, done.replayed) == (1, False)
    assert read_committed(bootstrap, sink, 1) == sorted(first + second + third)
    # the bookkeeping topic: created with 16 partitions, grown for writer partition 20
    assert partitions_of(bootstrap, book_topic(prefix)) == 16
    write_transactional(options, batches([b"p20"]), TxnTask(prefix, 0, 20, "query-b"))
    assert partitions_of(bootstrap, book_topic(prefix)) == 32
    assert committed_batch(options, TxnTask(prefix, 0, 20, "query-b")) == (1, "query-b")


def test_a_zombie_attempt_cannot_commit_after_a_new_one_started(kafka: Any) -> None:
    """Attempt 0 of a task stalls mid-write; attempt 1 of the same task (same
    transactional id) initialises, which fences attempt 0 and aborts its open
    transaction, and writes the batch. Attempt 0 must then fail, and a
    read_committed reader sees attempt 1's rows only."""
    bootstrap = kafka.bootstrap_servers
    sink = create_topic(bootstrap, topic_name("eos-zombie"), 1)
    options = parse_sink({"kafka.bootstrap.servers": bootstrap, "topic": sink,
                          "exactlyOnce": "true"}, True)
    task = TxnTask(topic_name("zombie"), 7, 0, "q")
    winner = [f"attempt1-{i}".encode() for i in range(6)]
    outcome: list[Any] = []

    def stalling() -> Iterator[pa.RecordBatch]:
        yield from batches([b"zombie-0", b"zombie-1"])
        time.sleep(0.2)  # let the zombie's first records reach its transaction
        outcome.append(write_transactional(options, batches(winner), task))
        yield from batches([b"zombie-2"])

    with pytest.raises(KafkaException) as raised:
        write_transactional(options, stalling(), task)
    assert raised.value.args[0].name() in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    assert outcome[0].rows == 6 and not outcome[0].replayed
    assert read_committed(bootstrap, sink, 1) == sorted(winner)
    assert committed_batch(options, task) == (8, "q")


def test_options() -> None:
    base = {"kafka.bootstrap.servers": "x:1", "topic": "t"}
    assert parse_sink({**base, "exactlyOnce": "true"}, True).exactly_once
    assert not parse_sink(base, True).exactly_once
    assert parse_sink({**base, "exactlyOnce": "true", "transactional.id.prefix": "app.v2"},
                      True).transactional_prefix == "app.v2"
    with pytest.raises(OptionError, match="streaming writes"):
        parse_sink({**base, "exactlyOnce": "true"}, False)
    with pytest.raises(OptionError, match=r"transactional\.id\.prefix"):
        parse_sink({**base, "exactlyOnce": "true", "transactional.id.prefix": "a b"}, True)
    with pytest.raises(OptionError, match="needs exactlyOnce"):
        parse_sink({**base, "transactional.id.prefix": "p"}, True)
    with pytest.raises(OptionError, match=r"kafka\.transactional\.id"):
        parse_sink({**base, "exactlyOnce": "true", "kafka.transactional.id": "p"}, True)
    assert book_topic("p") == "__odradek_sink_p"

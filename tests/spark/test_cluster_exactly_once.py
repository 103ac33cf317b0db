"""The exactly-once sink on a 3-node cluster, through the kill -9 of a broker.

A streaming copy of a 200,000-record RF=3 topic into another RF=3 topic with
``exactlyOnce=true``. Mid-stream the node leading most of the output
partitions is killed (-9), and started again a few seconds later; if the
query stops on the failure it is run again on its checkpoint. A read_committed
reader of the output then sees every input record exactly once.

Before issue 40's fixes this failed in its first micro-batch, before any
fault: TxnOffsetCommit was verified with the local transaction coordinator,
which is another broker two times in three (fatal INVALID_TXN_STATE).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.spark.test_sink_exactly_once import read_committed
from tests.support.cluster import LocalCluster, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

RECORDS = 200_000
PARTITIONS = 6
OVERRIDES = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "4000",
}


def _stream(spark: Any, bootstrap: str, checkpoint: Path) -> Any:
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "eos-in").option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "25000").load().select("key", "value"))
    return (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "eos-out").option("exactlyOnce", "true")
            .option("transactional.id.prefix", "cluster-eos")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def test_exactly_once_sink_through_a_killed_leader(spark: Any, tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", controllers=3, overrides=OVERRIDES)
    cluster.format()
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for topic in ("eos-in", "eos-out"):
            admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 20, "enable.idempotence": True})
        for i in range(RECORDS):
            while True:
                try:
                    producer.produce("eos-in", f"r{i}".encode(), partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(120) == 0
        meta = admin.list_topics("eos-out", timeout=20).topics["eos-out"].partitions
        leaders = Counter(p.leader for p in meta.values())
        victim = leaders.most_common(1)[0][0]
        checkpoint = tmp_path / "checkpoint"
        runs = 0
        killed = False
        while True:
            runs += 1
            assert runs <= 4, "the query kept failing"
            query = _stream(spark, cluster.bootstrap, checkpoint)
            if not killed:
                wait_for("two micro-batches written", lambda q=query: not q.isActive or sum(
                    1 for p in q.recentProgress if p["numInputRows"]) >= 2, 300, 0.2)
                cluster.kill(victim)
                killed = True
                time.sleep(3)
                cluster.start(victim)
            try:
                query.awaitTermination(600)
            except Exception as exc:  # the StreamingQueryException of a failed run
                print(f"run {runs} stopped: {str(exc)[:300]}; run again")
                continue
            assert not query.isActive, "the query did not finish in time"
            break
        got = read_committed(cluster.bootstrap, "eos-out", PARTITIONS)
        print(f"{len(got)} records read committed after {runs} run(s); node {victim} "
              f"(leading {leaders[victim]} of {PARTITIONS} output partitions) killed")
        assert len(got) == RECORDS
        assert got == sorted(f"r{i}".encode() for i in range(RECORDS))
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()

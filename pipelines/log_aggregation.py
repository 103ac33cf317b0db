"""Log aggregation: error rate per service per minute, alerts to a topic.

Reads log lines (JSON ``{"ts": epoch_ms, "service": str, "level": str,
"message": str}``) from a topic, computes per service and 1-minute window of
event time the number of lines, of ``ERROR`` lines and their ratio, and once
the watermark closes a window writes an alert (key = service, value = JSON)
for every window whose error rate is at least ``--threshold`` with at least
``--min-lines`` lines.

With ``--exactly-once`` the alerts are written through the sink's
exactly-once mode (transactions; see docs/transactions.md, "The Spark sink's
exactly-once mode"): after a crash and restart from the checkpoint, a
read_committed reader of the alerts topic sees each alert once. Without it, a
batch Spark reruns writes its alerts again.

    spark-submit pipelines/log_aggregation.py --bootstrap 127.0.0.1:9092
    python pipelines/log_aggregation.py --master 'local[*]' --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

LINE = StructType([
    StructField("ts", LongType()), StructField("service", StringType()),
    StructField("level", StringType()), StructField("message", StringType()),
])


def error_rates(logs: DataFrame, watermark: str) -> DataFrame:
    """One row per (window, service): window_start, window_end, service, lines,
    errors, error_rate."""
    parsed = (logs.select(F.from_json(F.col("value").cast("string"), LINE).alias("l"))
              .select("l.*").where(F.col("ts").isNotNull() & F.col("service").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (parsed.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), "service")
            .agg(F.count(F.lit(1)).alias("lines"),
                 F.sum(F.when(F.upper("level") == "ERROR", 1).otherwise(0)).alias("errors"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "service", "lines", "errors",
                    (F.col("errors") / F.col("lines")).alias("error_rate")))


def alerts(rates: DataFrame, threshold: float, min_lines: int) -> DataFrame:
    return rates.where((F.col("error_rate") >= threshold) & (F.col("lines") >= min_lines))


def build(spark: SparkSession, args: argparse.Namespace) -> list[Any]:
    logs = (spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.input_topic)
            .option("startingOffsets", args.starting_offsets).load())
    found = alerts(error_rates(logs, args.watermark), args.threshold, args.min_lines)
    writer = (found.select(F.col("service").alias("key"), F.to_json(F.struct(
        "service",
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
        F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
        "lines", "errors", F.round("error_rate", 4).alias("error_rate"))).alias("value"))
        .writeStream.format("odradek").queryName("error_alerts")
        .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.alerts_topic)
        .option("checkpointLocation", args.checkpoint).outputMode("append"))
    if args.exactly_once:
        writer = writer.option("exactlyOnce", "true")
        if args.transactional_id_prefix:
            writer = writer.option("transactional.id.prefix", args.transactional_id_prefix)
    writer = (writer.trigger(availableNow=True) if args.available_now
              else writer.trigger(processingTime=f"{args.trigger_seconds} seconds"))
    return [writer.start()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--input-topic", default="logs")
    p.add_argument("--alerts-topic", default="alerts")
    p.add_argument("--checkpoint", default="out/checkpoints/log-aggregation")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--threshold", type=float, default=0.05, help="error rate that alerts")
    p.add_argument("--min-lines", type=int, default=20, help="ignore quieter windows")
    p.add_argument("--watermark", default="30 seconds")
    p.add_argument("--trigger-seconds", type=int, default=5)
    p.add_argument("--available-now", action="store_true")
    p.add_argument("--exactly-once", action="store_true",
                   help="transactional alerts: each once for read_committed readers")
    p.add_argument("--transactional-id-prefix", default=None,
                   help="with --exactly-once (default: derived from the query id)")
    p.add_argument("--master", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    builder = SparkSession.builder.appName("log-aggregation").config(
        "spark.sql.shuffle.partitions", "4")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    for q in build(spark, args):
        q.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

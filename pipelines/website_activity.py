"""Website activity: page views per page per 1-minute window.

Reads page-view events (JSON ``{"ts": epoch_ms, "page": str, "user": str}``)
from a topic, counts views per page in tumbling 1-minute windows of event
time, and emits each window once the watermark has passed it (append mode)
to a topic (key = page, value = JSON) and to Parquet. Two queries share the
aggregation, each with its own checkpoint under ``--checkpoint``.

    spark-submit pipelines/website_activity.py --bootstrap 127.0.0.1:9092
    python pipelines/website_activity.py --master 'local[*]' --bootstrap 127.0.0.1:9092

Needs only pyspark, pyarrow and odradek where it runs (no JVM jars).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

EVENT = StructType([
    StructField("ts", LongType()), StructField("page", StringType()),
    StructField("user", StringType()),
])


def views_per_minute(events: DataFrame, watermark: str) -> DataFrame:
    """One row per (window, page): window_start, window_end, page, views."""
    parsed = (events.select(F.from_json(F.col("value").cast("string"), EVENT).alias("e"))
              .select("e.*").where(F.col("ts").isNotNull() & F.col("page").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (parsed.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), "page")
            .agg(F.count(F.lit(1)).alias("views"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "page", "views"))


def build(spark: SparkSession, args: argparse.Namespace) -> list[Any]:
    """Start both queries; returns them."""
    events = (spark.readStream.format("odradek")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input_topic)
              .option("startingOffsets", args.starting_offsets).load())
    counts = views_per_minute(events, args.watermark)

    def trigger(writer: Any) -> Any:
        return (writer.trigger(availableNow=True) if args.available_now
                else writer.trigger(processingTime=f"{args.trigger_seconds} seconds"))

    to_topic = trigger(
        counts.select(F.col("page").alias("key"), F.to_json(F.struct(
            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "page", "views")).alias("value"))
        .writeStream.format("odradek").queryName("views_to_topic")
        .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output_topic)
        .option("checkpointLocation", f"{args.checkpoint}/topic").outputMode("append")
    ).start()
    to_files = trigger(
        counts.writeStream.format("parquet").queryName("views_to_parquet")
        .option("path", args.output_dir)
        .option("checkpointLocation", f"{args.checkpoint}/parquet").outputMode("append")
    ).start()
    return [to_topic, to_files]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--input-topic", default="pageviews")
    p.add_argument("--output-topic", default="pageviews-per-minute")
    p.add_argument("--output-dir", default="out/pageviews-per-minute")
    p.add_argument("--checkpoint", default="out/checkpoints/website-activity")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--watermark", default="30 seconds", help="how late events may arrive")
    p.add_argument("--trigger-seconds", type=int, default=5)
    p.add_argument("--available-now", action="store_true",
                   help="process what is in the topic now, then stop")
    p.add_argument("--master", default=None, help="e.g. local[*] (spark-submit sets it)")
    return p


def session(master: str | None, app: str) -> SparkSession:
    builder = SparkSession.builder.appName(app).config("spark.sql.shuffle.partitions", "4")
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spark = session(args.master, "website-activity")
    queries = build(spark, args)
    for q in queries:
        q.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

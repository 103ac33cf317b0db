"""A Spark driver for the crash test: copies a topic into Parquet, exactly once.

    python copy_driver.py BOOTSTRAP TOPIC OUT CHECKPOINT (stream|available-now)

Each row is (partition, offset, value). ``stream`` runs micro-batches of at
most 1,500 records until killed; ``available-now`` drains the topic and exits 0.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main() -> None:
    bootstrap, topic, out, checkpoint, mode = sys.argv[1:6]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("copy")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "1500").load()
          .select("partition", "offset", "value"))
    writer = (df.writeStream.format("parquet").option("path", out)
              .option("checkpointLocation", checkpoint))
    writer = (writer.trigger(availableNow=True) if mode == "available-now"
              else writer.trigger(processingTime="0 seconds"))
    writer.start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()

"""A Spark driver whose workers' interpreter (PYSPARK_PYTHON, from the
environment) may lack odradek: prints, as JSON, what ``format("odradek")`` and
``odradek.spark.register`` say.

    PYSPARK_PYTHON=/path/to/python python worker_check_driver.py
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession


def main() -> None:
    spark = (SparkSession.builder.master("local[1]").appName("worker-check")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, str] = {}
    try:
        (spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9")
         .option("subscribe", "t").load())
        out["load"] = "loaded"
    except Exception as exc:
        out["load"] = str(exc)
    import odradek.spark

    try:
        odradek.spark.register(spark)
        out["register"] = "registered"
    except odradek.spark.WorkerPythonError as exc:
        out["register"] = str(exc)
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()

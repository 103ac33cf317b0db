"""Odradek for PySpark: ``format("odradek")``, Spark's Kafka connector without the JVM jars.

Installing odradek installs the ``pyspark_odradek`` package, which Spark finds
by itself; :func:`register` does the same explicitly::

    df = (spark.readStream.format("odradek")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs ``pyspark`` (4.1 or later) and ``pyarrow`` where the driver and
executors run: ``pip install 'odradek[spark]'``.
"""

from __future__ import annotations

from typing import Any

from odradek.spark.source import OdradekDataSource

__all__ = ["OdradekDataSource", "register"]


def register(spark: Any) -> None:
    """Make ``format("odradek")`` known to a SparkSession."""
    spark.dataSource.register(OdradekDataSource)

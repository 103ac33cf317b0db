"""Odradek for PySpark: ``format("odradek")``, Spark's Kafka connector without the JVM jars.

Installing odradek installs the ``pyspark_odradek`` package, which Spark finds
by itself; :func:`register` does the same explicitly::

    df = (spark.readStream.format("odradek")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs ``pyspark`` (4.1 or later) and ``pyarrow`` where the driver and
executors run: ``pip install 'odradek[spark]'``. Spark's Python workers run the
interpreter named by ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``); when it
cannot import odradek, Spark says only ``DATA_SOURCE_NOT_FOUND``, while
:func:`register` raises :class:`WorkerPythonError` naming the interpreter and
the import error.
"""

from __future__ import annotations

from typing import Any

from odradek.spark.source import OdradekDataSource
from odradek.spark.workers import WorkerPythonError, check_worker_python

__all__ = ["OdradekDataSource", "WorkerPythonError", "check_worker_python", "register"]


def register(spark: Any) -> None:
    """Make ``format("odradek")`` known to a SparkSession, after checking that its
    Python workers can import odradek (:class:`WorkerPythonError` otherwise)."""
    check_worker_python(spark)
    spark.dataSource.register(OdradekDataSource)

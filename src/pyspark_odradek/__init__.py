"""Found by Spark's data source lookup (packages named ``pyspark_*`` with a
``DefaultSource``): ``format("odradek")`` works without registering."""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]

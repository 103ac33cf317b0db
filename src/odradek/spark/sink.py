"""The ``odradek`` sink: ``df.write`` and ``df.writeStream`` to topics.

Columns are those of Spark's Kafka sink: ``value`` (string or binary,
required), ``key`` (string or binary), ``topic`` (string; the ``topic``
option wins over it), ``partition`` (int; null lets the partitioner choose)
and ``headers`` (array<struct<key string, value binary>>). They are checked
when the write is planned, so a wrong DataFrame fails at ``save()`` or
``start()``.

Delivery is at-least-once, as with Spark's Kafka sink: every task flushes its
producer and fails unless every record was acknowledged, and a batch Spark
replays after a crash is written again. Batch writes accept only
``mode("append")``; streaming writes any output mode, writing each batch's rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.spark.kafka import write_batches
from odradek.spark.options import OptionError, SinkOptions, parse_sink

_TEXT = (StringType, BinaryType)


@dataclass
class Written(WriterCommitMessage):
    rows: int


def check_columns(schema: StructType, options: SinkOptions) -> None:
    """Refuse a DataFrame the sink cannot write, naming the column."""
    types: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("the DataFrame written to odradek needs a 'value' column")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], _TEXT):
            raise OptionError(f"column {name!r} must be string or binary, not "
                              f"{types[name].simpleString()}")
    if options.topic is None:
        if "topic" not in types:
            raise OptionError("give the 'topic' option or a 'topic' column")
        if not isinstance(types["topic"], StringType):
            raise OptionError("column 'topic' must be a string")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError("column 'partition' must be an int")
    if "headers" in types:
        h = types["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in h.elementType.fields]
              == [("key", StringType), ("value", BinaryType)])
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key: string, "
                              "value: binary>>")


def _options(raw: Mapping[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise OptionError("the odradek sink only appends: use mode('append')")
    options = parse_sink(raw)
    check_columns(schema, options)
    return options


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    @classmethod
    def create(cls, raw: Mapping[str, str], schema: StructType, overwrite: bool) -> BatchWriter:
        return cls(_options(raw, schema, overwrite))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(write_batches(self.options, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    @classmethod
    def create(cls, raw: Mapping[str, str], schema: StructType, overwrite: bool) -> StreamWriter:
        # complete and update output modes write each batch's rows, as Kafka's sink does
        return cls(_options(raw, schema, overwrite=False))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task's records were acknowledged before it ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already acknowledged stay (at-least-once); nothing to undo."""

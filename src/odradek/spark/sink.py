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

from odradek.spark.kafka import TxnTask, write_batches, write_transactional
from odradek.spark.options import OptionError, SinkOptions, parse_sink

# Local properties Spark's micro-batch engine gives every task of a batch
# (StreamExecution.BATCH_ID_KEY and QUERY_ID_KEY); the query id is the one in
# the checkpoint's metadata file, the same after every restart.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"

_TEXT = (StringType, BinaryType)


@dataclass
class Written(WriterCommitMessage):
    """``rows`` a task wrote; ``replayed``: the exactly-once sink found the
    task's rows already committed by an earlier run of the batch and wrote none."""

    rows: int
    replayed: bool = False


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


def _options(raw: Mapping[str, str], schema: StructType, overwrite: bool,
             streaming: bool) -> SinkOptions:
    if overwrite:
        raise OptionError("the odradek sink only appends: use mode('append')")
    options = parse_sink(raw, streaming)
    check_columns(schema, options)
    return options


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    @classmethod
    def create(cls, raw: Mapping[str, str], schema: StructType, overwrite: bool) -> BatchWriter:
        return cls(_options(raw, schema, overwrite, streaming=False))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(write_batches(self.options, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    @classmethod
    def create(cls, raw: Mapping[str, str], schema: StructType, overwrite: bool) -> StreamWriter:
        # complete and update output modes write each batch's rows, as Kafka's sink does
        return cls(_options(raw, schema, overwrite=False, streaming=True))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self.options.exactly_once:
            return Written(write_batches(self.options, iterator))
        done = write_transactional(self.options, iterator, self.task())
        return Written(done.rows, done.replayed)

    def task(self) -> TxnTask:
        """This task's place: Spark's batch id, query id and partition id."""
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        if context is None or batch is None:
            raise RuntimeError("exactlyOnce needs Spark's micro-batch engine: no batch id "
                               f"({BATCH_ID_PROPERTY}) in this task's context")
        query = context.getLocalProperty(QUERY_ID_PROPERTY) or ""
        prefix = self.options.transactional_prefix or default_prefix(query)
        return TxnTask(prefix, int(batch), context.partitionId(), query)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task's records were acknowledged (or, exactly
        once, committed with its marker) before it ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo. At-least-once: acknowledged records stay. Exactly
        once: tasks that committed stay committed and are skipped when Spark
        reruns the batch; the others' transactions were aborted."""


def default_prefix(query_id: str) -> str:
    """The transactional id prefix when none is given: Spark's query id, which
    the checkpoint keeps across restarts (a new checkpoint is a new query)."""
    if not query_id:
        raise RuntimeError("exactlyOnce without 'transactional.id.prefix' needs Spark's query "
                           "id, and this task has none: set the option")
    return f"odradek-{query_id}"

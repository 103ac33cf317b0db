"""The ``odradek`` sink: ``df.write`` and ``df.writeStream`` to topics.

Columns are those of Spark's Kafka sink: ``value`` (string or binary,
required), ``key`` (string or binary), ``topic`` (string; the ``topic``
option wins over it), ``partition`` (int; null lets the partitioner choose)
and ``headers`` (array<struct<key string, value binary>>). They are checked
when the write is planned, so a wrong DataFrame fails at ``save()`` or
``start()``.

By default delivery is at-least-once, as with Spark's Kafka sink: every task
flushes its producer and fails unless every record was acknowledged, and a
batch Spark replays after a crash is written again. Batch writes accept only
``mode("append")``; streaming writes any output mode, writing each batch's rows.

Exactly-once streaming writes (``exactlyOnce=true``, writeStream only)
----------------------------------------------------------------------
Each writer task (one Spark partition P of micro-batch N) writes through a
fresh transactional producer whose ``transactional.id`` is ``<prefix>-P``.
The prefix is the option ``transactional.id.prefix`` or, when absent,
``odradek-<Spark query id>``: the query id comes from the checkpoint, so it
is the same after every restart and new for a new checkpoint. Spark gives the
task its batch id and query id as local properties of the task context
(``streaming.sql.batchId``, ``sql.streaming.queryId``); the writer API itself
has no batch id in ``write()``. The task:

1. ``init_transactions()``: fences every earlier producer of ``<prefix>-P``
   (a zombie attempt of this task, a crashed run of the query); its open
   transaction is aborted, a prepared one completed;
2. reads its marker: the offset committed by group ``<prefix>-sink`` for
   partition P of the topic ``__odradek_sink_<prefix>`` (created on first
   use and grown as needed; it holds no records), read_committed. If the
   marker says batch N is already committed by this query (offset > N and
   metadata = the query id), the task writes nothing and reports success:
   this is Spark rerunning a batch whose Kafka commit happened but whose
   checkpoint commit did not (a driver crash in between);
3. otherwise begins a transaction, produces the rows, commits the marker
   ``N + 1`` (metadata: the query id) with ``send_offsets_to_transaction`` in
   the same transaction, and commits it. A task with no rows does nothing.

Limits (also in docs/transactions.md, "The Spark sink's exactly-once mode"):

- Readers must use ``isolation.level=read_committed``; a read_uncommitted
  reader also sees the rows of aborted attempts.
- Atomic per task, not per batch: a read_committed reader can see the rows
  of some partitions of batch N before the others'. If batch N fails midway,
  the partitions that committed stay, and Spark's rerun skips them.
- A rerun must give each partition id the same rows as the first run: the
  plan must be deterministic (no ``rand()``, ``uuid()``, ``current_timestamp``
  in the written rows, a source that replays the same offsets, as this one
  does) and the number of partitions of a batch must not change between runs
  (don't change ``spark.sql.shuffle.partitions``, ``repartition(n)`` or
  ``minPartitions`` and then restart on the same checkpoint).
- One query per prefix: two queries running with one prefix fence each other.
  A prefix reused by a new checkpoint (new query id) is not mistaken for a
  replay, but its bookkeeping group and topic are shared.
- Deleting the bookkeeping group ``<prefix>-sink`` (or its topic) loses the
  markers: a rerun batch would be written again.
- A task's transaction must finish within ``transaction.timeout.ms`` (60 s by
  default; ``kafka.transaction.timeout.ms`` sets it, the broker caps it at
  ``transaction.max.timeout.ms``), or the coordinator aborts it and the task
  fails. Keep micro-batches small enough.
- Each task with rows pays for a producer start-up and ``init_transactions``
  (tens of ms), the marker read, and the transaction's requests
  (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn); see
  ``benchmarks/spark_bench.py`` (e) for the cost against at-least-once.
- Batch writes (``df.write``) refuse ``exactlyOnce``: there is no batch id to
  recognise a rerun by. Spark's own Kafka sink is at-least-once everywhere.
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

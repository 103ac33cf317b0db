"""The ``odradek`` data source: Spark's Kafka connector, in Python.

Where each piece runs (pyspark 4.3, see ../shared/research/spark-python-datasource.md):

- ``OdradekDataSource.schema()`` runs at ``load()``: every option that holds
  for both batch and streaming reads is checked there, so a wrong one fails at
  ``load()``; batch-only and stream-only rules fail at the action or at
  ``start()``.
- The stream reader's ``initialOffset``/``latestOffset``/``partitions``/
  ``commit`` run in one long-lived driver-side Python process per query; its
  :class:`Admin` lives there and is dropped when the reader is pickled.
- ``read(partition)`` runs on executors with nothing but the pickled options
  and the partition's exact offset range.

Offsets are ``{"topic": {"partition": next_offset}}`` built in sorted order
(Spark compares them as strings). The query's progress is stored under a
consumer group (``kafka.group.id``, or ``groupIdPrefix`` plus a hash of the
subscription; ``commitOffsetsToGroup=false`` turns it off) so ``odradek
groups describe`` shows its lag: ``latestOffset(start)`` commits ``start``,
which Spark only passes once the batch ending there has completed, and
``commit(end)`` (one batch late) does the same. The checkpoint stays the
source of truth; the group is never read back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.kafka import Admin, DataLossError, read_range
from odradek.spark.offsets import Offsets, Range, from_json, rate_limit, split, to_json
from odradek.spark.options import OptionError, SourceOptions, parse_source

log = logging.getLogger("odradek.spark")

HEADERS = ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType()),
]))


def read_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (headers only with includeHeaders=true)."""
    fields = [
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


@dataclass
class RangePartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def _partitions(ranges: list[Range], options: SourceOptions) -> list[InputPartition]:
    return [RangePartition(r.topic, r.partition, r.start, r.end)
            for r in split(ranges, options.min_partitions)]


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        return iter(())  # Spark's placeholder when there is nothing to read
    return read_range(options, Range(
        partition.topic, partition.partition, partition.start, partition.end
    ))


def _data_loss(options: SourceOptions, message: str) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{message}; some data may have been lost. Set failOnDataLoss=false to go on"
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def _fixed_schema(schema: StructType, options: SourceOptions) -> None:
    if schema != read_schema(options.include_headers):
        raise OptionError("the odradek source has a fixed schema and cannot be set with a "
                          "custom one")


class OdradekDataSource(DataSource):
    """``format("odradek")``: Spark's Kafka source and sink options and schema."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        options = parse_source(self.options, streaming=None)
        return read_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source(self.options, streaming=False)
        _fixed_schema(schema, options)
        return BatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source(self.options, streaming=True)
        _fixed_schema(schema, options)
        return StreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink import BatchWriter

        return BatchWriter.create(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink import StreamWriter

        return StreamWriter.create(self.options, schema, overwrite)


class BatchReader(DataSourceReader):
    """``spark.read``: the range between startingOffsets and endingOffsets, planned once."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        admin = Admin(self.options)
        tps = admin.partitions()
        start = admin.resolve(self.options.starting, tps)
        end = admin.resolve(self.options.ending, tps)
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                _data_loss(self.options, f"{tp[0]}-{tp[1]}: ending offset {end[tp]} is before "
                                         f"the starting offset {start[tp]}")
                continue
            ranges.append(Range(tp[0], tp[1], start[tp], end[tp]))
        return _partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches of offset ranges with admission control."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: Admin | None = None
        self._last_trigger_ms = 0.0
        self._target: Offsets | None = None  # set by AvailableNow: never read past it
        self._latest: Offsets | None = None
        self._committed: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_admin": None, "_last_trigger_ms": 0.0,
                "_target": None, "_latest": None, "_committed": None}

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.options)
        return self._admin

    def initialOffset(self) -> dict[str, Any]:
        tps = self.admin.partitions()
        return to_json(self.admin.resolve(self.options.starting, tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.admin.latest(self.admin.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        # Spark plans a batch only once the one before has completed, so
        # ``start`` is done: report it now rather than one batch late in commit()
        self.commit(start)
        begin = from_json(start)
        tps = self.admin.partitions()
        latest = self.admin.latest(tps)
        for tp in sorted(set(begin) - set(latest)):
            _data_loss(self.options, f"{tp[0]}-{tp[1]} no longer exists")
            begin.pop(tp)
        if self._target is not None:
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items()
                      if tp in self._target}
        self._latest = latest
        base = dict(begin)
        base.update(self.admin.earliest([tp for tp in latest if tp not in begin]))
        now = time.monotonic() * 1000
        min_rows = self.options.min_offsets_per_trigger
        if min_rows and self._target is None and not isinstance(limit, ReadAllAvailable):
            backlog = sum(max(0, o - base[tp]) for tp, o in latest.items())
            waited = now - self._last_trigger_ms
            if backlog < min_rows and waited < self.options.max_trigger_delay_ms:
                return start
        end = rate_limit(base, latest, limit.max_rows) if isinstance(limit, ReadMaxRows) else latest
        result = to_json({**begin, **end})
        if result != start:
            self._last_trigger_ms = now
        return result

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.admin.earliest(new))
        ranges = []
        for tp, stop in sorted(until.items()):
            if stop < begin[tp]:
                _data_loss(self.options, f"{tp[0]}-{tp[1]}: offset went back from {begin[tp]} "
                                         f"to {stop} (topic recreated or truncated)")
                continue
            ranges.append(Range(tp[0], tp[1], begin[tp], stop))
        return _partitions(ranges, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Store ``end`` as the query's group offsets (best effort, once per value)."""
        group = self.options.commit_group
        if group is None or end == self._committed:
            return
        try:
            self.admin.commit(group, from_json(end))
            self._committed = end
        except Exception as exc:  # progress reporting only: never fail the query
            log.warning("could not commit the query's offsets to group %s: %s", group, exc)

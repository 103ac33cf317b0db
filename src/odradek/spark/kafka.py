"""Everything the Spark source and sink say to the brokers, through confluent-kafka.

Why confluent-kafka and not Odradek's own client: librdkafka fetches and
decompresses in its own threads while the Python worker builds Arrow columns,
speaks every broker version and security option (``kafka.*`` options are
passed straight to it) and measured faster per record here; see
``docs/spark.md`` for the figures. It works against any Kafka-compatible
broker.

- :class:`Admin` (driver): topic discovery, earliest/latest/by-timestamp
  offsets through ListOffsets, committing a query's progress to a group.
- :func:`read_range` (executor): exact offsets ``[start, end)`` of one
  partition by assign + seek (no group membership), as Arrow record batches in
  Spark's Kafka schema.
- :func:`write_batches` (executor): rows to a producer, flushed and checked
  before the task reports success (at-least-once, as Spark's Kafka sink).
- :func:`write_transactional` (executor): one task's rows and its batch
  marker in one transaction, skipped when the marker shows the batch already
  committed (the sink's ``exactlyOnce`` mode; see ``sink.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]

from odradek.spark.offsets import Offsets, Range
from odradek.spark.options import EARLIEST, LATEST, Position, SinkOptions, SourceOptions

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_BATCH_ROWS = 50_000
_ADMIN_TIMEOUT_S = 30.0
# librdkafka's timestamp types (0 none, 1 create, 2 log append) -> Java's ids.
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}
# Options only a consumer understands; the admin and producer handles would warn.
_CONSUMER_ONLY = ("isolation.level", "fetch.", "max.partition.fetch.bytes", "group.",
                  "session.timeout.ms", "heartbeat.interval.ms", "queued.", "check.crcs")


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, DeleteRecords, a deleted topic)."""


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()),
        pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


OffsetSpec: Any = _OffsetSpec  # its class methods are untyped


def _admin_config(config: dict[str, str]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not k.startswith(_CONSUMER_ONLY)}


class Admin:
    """Driver-side questions about topics and offsets (one client per query)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.client = AdminClient(_admin_config(options.config()))
        level = options.config().get("isolation.level", "read_uncommitted")
        self.isolation = (IsolationLevel.READ_COMMITTED if level == "read_committed"
                          else IsolationLevel.READ_UNCOMMITTED)

    def partitions(self) -> list[tuple[str, int]]:
        """The topic-partitions the subscription names that exist now."""
        sub = self.options.subscription
        meta = self.client.list_topics(timeout=_ADMIN_TIMEOUT_S)
        if sub.kind == "assign":
            return [(t, p) for t, ps in sub.assigned for p in ps]
        out: list[tuple[str, int]] = []
        for name, topic in meta.topics.items():
            if topic.error is not None or not sub.matches(name):
                continue
            if sub.kind == "subscribePattern" and name.startswith("__"):
                continue
            out.extend((name, p) for p in topic.partitions)
        return sorted(out)

    def list_offsets(self, tps: Iterable[tuple[str, int]], spec: Any) -> Offsets:
        """(topic, partition) -> offset for one OffsetSpec (earliest/latest/timestamp)."""
        wanted = {TopicPartition(t, p): spec for t, p in tps}
        if not wanted:
            return {}
        futures = self.client.list_offsets(
            wanted, isolation_level=self.isolation, request_timeout=_ADMIN_TIMEOUT_S
        )
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def earliest(self, tps: Iterable[tuple[str, int]]) -> Offsets:
        return self._bound(tps, OffsetSpec.earliest, "earliest")

    def latest(self, tps: Iterable[tuple[str, int]]) -> Offsets:
        return self._bound(tps, OffsetSpec.latest, "latest")

    def _bound(self, tps: Iterable[tuple[str, int]], spec: Any, what: str) -> Offsets:
        """Earliest or latest offsets, every one known: a partition whose leader is
        moving may be answered with no offset (librdkafka's -1001) and no error;
        that is asked again (until the admin timeout) rather than taken for an
        offset that went back (which would be reported as data loss)."""
        wanted = list(tps)
        deadline = time.monotonic() + _ADMIN_TIMEOUT_S
        out: Offsets = {}
        while True:
            out.update(self.list_offsets(wanted, spec()))
            wanted = [tp for tp in wanted if out[tp] < 0]
            if not wanted:
                return out
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, (
                    f"no {what} offset known for " +
                    ", ".join(f"{t}-{p}" for t, p in wanted) +
                    f" within {_ADMIN_TIMEOUT_S:g} s")))
            time.sleep(0.2)

    def resolve(self, position: Position, tps: list[tuple[str, int]]) -> Offsets:
        """Concrete offsets of ``tps`` for a starting or ending position."""
        if position.kind == "earliest":
            return self.earliest(tps)
        if position.kind == "latest":
            return self.latest(tps)
        if position.kind == "offsets":
            given = dict(position.offsets)
            if missing := [tp for tp in tps if tp not in given]:
                # Spark's Kafka source refuses this too (fetchSpecificOffsets)
                raise ValueError(
                    "offsets given as JSON must list every partition of the subscription; "
                    "missing " + ", ".join(f"{t}-{p}" for t, p in missing)
                )
            out = {tp: given[tp] for tp in tps}
            earliest = [tp for tp, o in out.items() if o == EARLIEST]
            latest = [tp for tp, o in out.items() if o == LATEST]
            out.update(self.earliest(earliest))
            out.update(self.latest(latest))
            return out
        stamps = (dict.fromkeys(tps, position.timestamp) if position.kind == "timestamp"
                  else dict(position.timestamps))
        out = {}
        for tp in tps:
            ts = stamps.get(tp)
            if ts is None:
                out.update(self.earliest([tp]))
                continue
            (offset,) = self.list_offsets([tp], OffsetSpec.for_timestamp(ts)).values()
            if offset < 0:
                if position.strategy == "error":
                    raise ValueError(
                        f"no offset of {tp[0]}-{tp[1]} has a timestamp at or after {ts}; set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead"
                    )
                offset = self.latest([tp])[tp]
            out[tp] = offset
        return out

    def commit(self, group: str, offsets: Offsets) -> None:
        """Store offsets under ``group`` (OffsetCommit without joining it)."""
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        if not tps:
            return
        futures = self.client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], request_timeout=_ADMIN_TIMEOUT_S
        )
        for f in futures.values():
            f.result()


# -- executors -------------------------------------------------------------------------

_consumers: dict[tuple[tuple[str, str], ...], Any] = {}


def _consumer(options: SourceOptions) -> Any:
    """A consumer per configuration, kept for the life of the (reused) Python worker."""
    key = options.client_config
    consumer = _consumers.get(key)
    if consumer is None:
        config: dict[str, Any] = {
            "group.id": "spark-odradek-executor",
            "isolation.level": "read_uncommitted",
            # librdkafka prefetches until queued.min.messages records or
            # queued.max.messages.kbytes wait locally, then pauses fetching for
            # fetch.queue.backoff.ms (1 s by default). A task stops at its range's
            # end, so read ahead at most 8 MiB past it, and re-check every 5 ms
            # instead of sitting out a second.
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 8192,
            "fetch.queue.backoff.ms": 5,
            "fetch.wait.max.ms": 100,
            **options.config(),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
        consumer = _consumers[key] = Consumer(config)
    return consumer


def read_range(options: SourceOptions, r: Range) -> Iterator[pa.RecordBatch]:
    """Records ``[r.start, r.end)`` of one partition as Arrow record batches.

    Stops on position, not on count: compaction and transaction markers leave
    gaps. Offsets below the log start are data loss: an error when
    ``failOnDataLoss``, otherwise the range starts at the log start instead.
    """
    if r.end <= r.start:
        return
    consumer = _consumer(options)
    tp = TopicPartition(r.topic, r.partition, r.start)
    consumer.assign([tp])
    try:
        yield from _read_assigned(consumer, options, r)
    finally:
        consumer.unassign()


def _read_assigned(consumer: Any, options: SourceOptions, r: Range) -> Iterator[pa.RecordBatch]:
    schema = arrow_schema(options.include_headers)
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    end = r.end
    next_offset = r.start
    kept: list[Any] = []  # messages in range, in offset order
    while next_offset < end:
        # consume(n) returns early only with n records: never ask past the range
        messages = consumer.consume(max(1, min(10_000, end - next_offset)), 1.0)
        if not messages:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no records of {r.topic}-{r.partition} from offset {next_offset} within "
                    f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}"
                )
            continue
        clean = [m for m in messages if m.error() is None]
        if clean:
            if clean[0].offset() < next_offset or clean[-1].offset() >= end:
                clean = [m for m in clean if next_offset <= m.offset() < end]
            if clean:
                kept.extend(clean)
                next_offset = clean[-1].offset() + 1
        if len(clean) < len(messages):
            for m in messages:
                if m.error() is not None:
                    next_offset = _handle_error(consumer, options, r, m, next_offset)
                elif m.offset() >= end:
                    next_offset = end
        if next_offset < end and clean:
            # a batch may end on a gap (compaction, markers): ask where we are
            position = consumer.position([TopicPartition(r.topic, r.partition)])[0].offset
            if position > next_offset:
                next_offset = position
        if len(kept) >= ARROW_BATCH_ROWS:
            yield _batch(schema, r, kept)
            kept = []
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
    if kept:
        yield _batch(schema, r, kept)


def _handle_error(consumer: Any, options: SourceOptions, r: Range, m: Any, at: int) -> int:
    """The offset to go on from after an error event, or raise."""
    err = m.error()
    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        # the end of what the partition holds now: done if it covers the range
        eof = m.offset()
        if eof >= r.end or eof < 0:
            return max(at, int(eof))
        if options.fail_on_data_loss:
            raise DataLossError(
                f"{r.topic}-{r.partition} ends at offset {eof}, before {r.end} as planned "
                "(truncated or recreated); some data may have been lost. Set "
                "failOnDataLoss=false to skip it instead of failing"
            )
        return r.end
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(r.topic, r.partition), timeout=_ADMIN_TIMEOUT_S, cached=False
        )
        what = (f"offsets {at}..{min(low, r.end) - 1} of {r.topic}-{r.partition} are gone "
                f"(the log now starts at {low})" if at < low else
                f"offset {at} of {r.topic}-{r.partition} is past the end of the log ({high})")
        if options.fail_on_data_loss:
            raise DataLossError(
                f"{what}; some data may have been lost. Set failOnDataLoss=false to skip it "
                "instead of failing"
            )
        restart = max(at, low) if at < low else r.end
        if restart < r.end:  # assign again: the failed partition refuses a seek
            consumer.assign([TopicPartition(r.topic, r.partition, restart)])
        return restart
    raise KafkaException(err)


def _batch(schema: pa.Schema, r: Range, kept: list[Any]) -> pa.RecordBatch:
    """Arrow columns of the messages; one C call per message and column."""
    n = len(kept)
    stamps = [m.timestamp() for m in kept]
    millis = pa.array([t[1] for t in stamps], pa.int64())
    kinds = {t[0] for t in stamps}
    types = (pa.repeat(_TIMESTAMP_TYPE.get(kinds.pop(), -1), n).cast(pa.int32())
             if len(kinds) == 1 else
             pa.array([_TIMESTAMP_TYPE.get(t[0], -1) for t in stamps], pa.int32()))
    columns = [
        pa.array([m.key() for m in kept], pa.binary()),
        pa.array([m.value() for m in kept], pa.binary()),
        pa.repeat(r.topic, n).cast(pa.string()),
        pa.repeat(r.partition, n).cast(pa.int32()),
        pa.array([m.offset() for m in kept], pa.int64()),
        pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
        types,
    ]
    if len(schema) == 8:
        headers = [m.headers() for m in kept]
        columns.append(pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            HEADERS_TYPE,
        ))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# -- sink ------------------------------------------------------------------------------

_producers: dict[tuple[tuple[str, str], ...], Any] = {}


def _producer(options: SinkOptions) -> Any:
    producer = _producers.get(options.client_config)
    if producer is None:
        config: dict[str, Any] = {"linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                                  **options.config()}
        producer = _producers[options.client_config] = Producer(config)
    return producer


def _produce_all(producer: Any, options: SinkOptions, batches: Iterable[pa.RecordBatch],
                 failures: list[str]) -> int:
    """Hand every row of ``batches`` to ``producer``; delivery errors go to ``failures``."""

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for batch in batches:
        rows = _rows(options, batch)
        for topic, key, value, partition, headers in rows:
            kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if headers:
                kwargs["headers"] = headers
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    return count


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns the count once all are acknowledged.

    Columns: ``value`` (required; string or binary), ``key``, ``topic`` (unless the
    ``topic`` option is set, which wins), ``partition`` (null: the partitioner
    decides) and ``headers`` (array of key/value structs).
    """
    producer = _producer(options)
    failures: list[str] = []
    count = _produce_all(producer, options, batches, failures)
    remaining = producer.flush(_ADMIN_TIMEOUT_S * 4)
    if remaining:
        raise RuntimeError(f"{remaining} records were not acknowledged in time")
    if failures:
        raise RuntimeError(f"{len(failures)} records failed to be written: {failures[0]}")
    return count


# -- the exactly-once sink -------------------------------------------------------------

_TXN_TIMEOUT_S = 60.0
# The bookkeeping topic is created with this many partitions at least and grown
# in steps of it (one partition per Spark writer partition).
_BOOK_PARTITIONS_STEP = 16
_book_partitions: dict[tuple[tuple[tuple[str, str], ...], str], int] = {}
_book_consumers: dict[tuple[tuple[tuple[str, str], ...], str], Any] = {}


@dataclass(frozen=True)
class TxnTask:
    """Who a transactional write is: the names derived from the prefix, the
    micro-batch and the Spark partition. ``query_id`` is stored with the marker
    so that a new query reusing a prefix is not mistaken for a replay."""

    prefix: str
    batch_id: int
    partition: int
    query_id: str = ""

    @property
    def transactional_id(self) -> str:
        return f"{self.prefix}-{self.partition}"

    @property
    def group(self) -> str:
        return f"{self.prefix}-sink"

    @property
    def book_topic(self) -> str:
        return book_topic(self.prefix)


def book_topic(prefix: str) -> str:
    """The topic whose partition P's offset in group ``<prefix>-sink`` records
    the last batch writer partition P committed (the topic holds no records)."""
    return f"__odradek_sink_{prefix}"


@dataclass(frozen=True)
class TxnWrite:
    """What a transactional task did: ``rows`` written, or ``replayed`` (the
    marker showed this batch already committed, so nothing was written)."""

    rows: int
    replayed: bool


def _sink_admin_config(options: SinkOptions) -> dict[str, Any]:
    return _admin_config(options.config())


def ensure_book_partitions(options: SinkOptions, topic: str, needed: int) -> None:
    """Make ``topic`` exist with at least ``needed`` partitions (tasks race: an
    existing topic or partitions another task added are fine). It is created
    before it is looked up: a Metadata request for a missing topic may
    auto-create it with the broker's default partition count."""
    key = (options.client_config, topic)
    if _book_partitions.get(key, 0) >= needed:
        return
    admin = AdminClient(_sink_admin_config(options))
    target = -(-needed // _BOOK_PARTITIONS_STEP) * _BOOK_PARTITIONS_STEP
    for attempt in range(10):
        try:
            if attempt == 0 and key not in _book_partitions:
                admin.create_topics([NewTopic(topic, target)])[topic].result(_ADMIN_TIMEOUT_S)
            meta = admin.list_topics(topic, timeout=_ADMIN_TIMEOUT_S).topics.get(topic)
            have = 0 if meta is None or meta.error is not None else len(meta.partitions)
            if have >= needed:
                _book_partitions[key] = have
                return
            if have:
                admin.create_partitions([NewPartitions(topic, target)])[topic].result(
                    _ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            code = exc.args[0].code()
            if code not in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS):
                raise
        time.sleep(0.05 * attempt)
    raise RuntimeError(f"could not give the bookkeeping topic {topic} {needed} partitions")


def _book_consumer(options: SinkOptions, group: str) -> Any:
    """An unsubscribed consumer of ``group``: it reads the markers (read_committed,
    so an offset still inside an open transaction is waited for) and gives the
    group metadata ``send_offsets_to_transaction`` needs."""
    key = (options.client_config, group)
    consumer = _book_consumers.get(key)
    if consumer is None:
        config: dict[str, Any] = {
            **{k: v for k, v in options.config().items()
               if not k.startswith(("linger.", "batch.", "acks", "compression.",
                                    "transaction", "queue.buffering", "retries",
                                    "delivery.", "message.timeout", "request.required"))},
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
        consumer = _book_consumers[key] = Consumer(config)
    return consumer


def committed_batch(options: SinkOptions, task: TxnTask) -> tuple[int, str] | None:
    """(next batch id, query id) of the last marker writer partition
    ``task.partition`` committed under its prefix, or None."""
    consumer = _book_consumer(options, task.group)
    (tp,) = consumer.committed([TopicPartition(task.book_topic, task.partition)],
                               timeout=_ADMIN_TIMEOUT_S)
    if tp.error is not None:
        raise KafkaException(tp.error)
    if tp.offset < 0:
        return None
    return tp.offset, tp.metadata or ""


def write_transactional(options: SinkOptions, batches: Iterable[pa.RecordBatch],
                        task: TxnTask) -> TxnWrite:
    """Write one Spark partition of one micro-batch exactly once.

    With a fresh producer of transactional id ``<prefix>-<partition>``:
    init_transactions (fencing every earlier producer of that id: a zombie
    attempt's open transaction is aborted, a prepared one completed), then read
    the partition's marker; if it says this batch is already committed (Spark
    replays a batch whose Kafka commit happened but whose checkpoint commit did
    not), write nothing. Otherwise begin, produce the rows, commit the marker
    ``batch_id + 1`` (metadata: the query id) to the bookkeeping partition in
    the same transaction, and commit it. A task with no rows touches nothing.
    """
    it = iter(batches)
    first = next((b for b in it if b.num_rows), None)
    if first is None:
        return TxnWrite(0, False)
    ensure_book_partitions(options, task.book_topic, task.partition + 1)
    # metadata.recovery.strategy=none unless the options say otherwise: with
    # librdkafka's re-bootstrap, a cluster whose every node was down at once can
    # leave send_offsets_to_transaction hanging past its timeout (librdkafka
    # issue #5511: the group coordinator cached on a decommissioned broker).
    config: dict[str, Any] = {"linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                              "metadata.recovery.strategy": "none",
                              **options.config(), "transactional.id": task.transactional_id}
    producer: Any = Producer(config)
    producer.init_transactions(_TXN_TIMEOUT_S)
    marker = committed_batch(options, task)
    if marker is not None and marker[1] == task.query_id and marker[0] > task.batch_id:
        for _ in it:  # the rows were committed by an earlier attempt: drain, write nothing
            pass
        return TxnWrite(0, True)
    producer.begin_transaction()
    failures: list[str] = []
    try:
        count = _produce_all(producer, options, itertools.chain([first], it), failures)
        book = TopicPartition(task.book_topic, task.partition, task.batch_id + 1,
                              metadata=task.query_id)
        producer.send_offsets_to_transaction(
            [book], _book_consumer(options, task.group).consumer_group_metadata(),
            _TXN_TIMEOUT_S)
        if failures:
            raise RuntimeError(f"{len(failures)} records failed to be written: {failures[0]}")
        producer.commit_transaction(_TXN_TIMEOUT_S * 4)
    except BaseException:
        with contextlib.suppress(Exception):  # fenced or fatal: the broker aborts it anyway
            producer.abort_transaction(_TXN_TIMEOUT_S)
        producer = None  # the traceback keeps this frame: let the client close now
        raise
    return TxnWrite(count, False)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _rows(
    options: SinkOptions, batch: pa.RecordBatch
) -> Iterator[tuple[str, Any, Any, int | None, Any]]:
    n = batch.num_rows
    values = _column(batch, "value")
    if values is None:
        raise ValueError("the DataFrame written to odradek needs a 'value' column")
    keys = _column(batch, "key") or [None] * n
    topics = [options.topic] * n if options.topic else _column(batch, "topic")
    if topics is None:
        raise ValueError("give the 'topic' option or a 'topic' column")
    partitions = _column(batch, "partition") or [None] * n
    headers = _column(batch, "headers") or [None] * n
    for i in range(n):
        topic = topics[i]
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        h = headers[i]
        yield (topic, _bytes(keys[i]), _bytes(values[i]), partitions[i],
               None if h is None else [(e["key"], e["value"]) for e in h])

"""The sink task thread.

A **sink** task: a consumer in group ``connect-<connector>``
(``enable.auto.commit=false``, ``auto.offset.reset=earliest``) → converters →
transforms → ``put``; every ``offset.flush.interval.ms`` (and on revocation
and stop) ``pre_commit`` then a synchronous commit of the offsets it returns.
A record that fails a stage with ``errors.tolerance=all`` is skipped and, with
``errors.deadletterqueue.topic.name`` set, its original bytes are produced to
that topic (created if missing), with the ``__connect.errors.*`` headers when
``errors.deadletterqueue.context.headers.enable`` is true.

``put`` is not covered by ``errors.tolerance`` (as in Kafka): a ``put`` that
raises :class:`RetriableError` is called again with the same batch after the
back-off the task set with ``context.timeout(ms)`` (at least 100 ms), until it
returns or the task stops; any other exception fails the task. Single bad
records are the task's to report through ``context.errant_record_reporter``
(KIP-610): with tolerance ``all`` they go to the DLQ like a converter's
failures, with ``none`` ``report`` raises :class:`ToleranceExceeded`. The back-off
waits without polling the consumer, so a task retrying for longer than the
consumer's ``max.poll.interval.ms`` loses its partitions and rejoins.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from odradek.connect.api import ErrantRecordReporter, SinkTask, SinkTaskContext, TopicPartition
from odradek.connect.converters.base import Converter
from odradek.connect.data import Header, SinkRecord
from odradek.connect.errors import ErrorHandler, Failure, RetriableError, Skip, dlq_headers
from odradek.connect.runtime.config import prefixed
from odradek.connect.runtime.pipeline import converter, header_converter
from odradek.connect.runtime.tasks import (
    KAFKA_LOG,
    PAUSED,
    RUNNING,
    STOP_TIMEOUT_S,
    TaskRunner,
)
from odradek.connect.transforms.chain import TransformChain

log = logging.getLogger("odradek.connect.sink")
MIN_BACKOFF_MS = 100
DLQ_PARTITIONS = 1
"""Kafka's reporter creates the dead letter queue with one partition."""


class ToleranceExceeded(Exception):
    """A record was reported while ``errors.tolerance`` is ``none``."""


class _Reporter(ErrantRecordReporter):
    def __init__(self, runner: SinkRunner, handler: ErrorHandler) -> None:
        self.runner = runner
        self.handler = handler

    def report(self, record: SinkRecord, error: BaseException) -> None:
        """Sends the record's original bytes (found by its original topic,
        partition and offset among the batch being put; for another record,
        its key and value converted again) to the DLQ."""
        runner, handler = self.runner, self.handler
        topic = record.original_topic or record.topic
        partition = (record.original_kafka_partition if record.original_kafka_partition >= 0
                     else record.kafka_partition)
        offset = (record.original_kafka_offset if record.original_kafka_offset >= 0
                  else record.kafka_offset)
        handler.failures += 1
        if handler.log_enable:
            extra = f" record={record!r}" if handler.log_messages else ""
            log.error("Error reported by task %s-%d for %s-%s@%s: %s%s", runner.connector,
                      runner.id, topic, partition, offset, error, extra)
        if not handler.tolerance_all:
            raise ToleranceExceeded(f"Tolerance exceeded in error handler: {error}") from error
        handler.skipped += 1
        raw = runner.raw.get((topic, partition, offset))
        if raw is None:  # not from the batch being put: written again, as Kafka does
            raw = (runner.kconv.from_connect_data(record.topic, record.key_schema, record.key),
                   runner.vconv.from_connect_data(record.topic, record.value_schema,
                                                  record.value))
        key, value = raw
        failure = Failure("TASK_PUT", type(runner.task).__name__, error, topic, partition,
                          offset)
        runner._to_dlq(handler, Skip(failure), topic, partition or 0, offset or 0, key, value)


class _SinkContext(SinkTaskContext):
    def __init__(self, runner: SinkRunner, configs: Mapping[str, str],
                 reporter: ErrantRecordReporter) -> None:
        self.configs = configs
        self.runner = runner
        self._reporter = reporter

    @property
    def errant_record_reporter(self) -> ErrantRecordReporter:
        return self._reporter

    def timeout(self, timeout_ms: int) -> None:
        self.runner.backoff_ms = max(0, int(timeout_ms))

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.runner.seeks.update(offsets)

    def assignment(self) -> set[TopicPartition]:
        return set(self.runner.assigned)

    def pause(self, *partitions: TopicPartition) -> None:
        self.runner.consumer.pause([KTopicPartition(p.topic, p.partition) for p in partitions])

    def resume(self, *partitions: TopicPartition) -> None:
        self.runner.consumer.resume([KTopicPartition(p.topic, p.partition) for p in partitions])

    def request_commit(self) -> None:
        self.runner.commit_requested = True


class SinkRunner(TaskRunner):
    consumer: Consumer
    kconv: Converter
    vconv: Converter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assigned: set[TopicPartition] = set()
        self.seeks: dict[TopicPartition, int] = {}
        self.current: dict[TopicPartition, int] = {}
        self.commit_requested = False
        self.dlq: Producer | None = None
        self.backoff_ms = 0
        # (topic, partition, offset) → (key, value) of the batch being put
        self.raw: dict[tuple[str, int | None, int | None], tuple[Any, Any]] = {}

    def _commit(self, only: set[TopicPartition] | None = None) -> None:
        task: SinkTask = self.task
        offsets = {tp: o for tp, o in self.current.items() if only is None or tp in only}
        if not offsets:
            return
        if self.dlq is not None:
            self.dlq.flush(STOP_TIMEOUT_S)
        allowed = task.pre_commit(offsets)
        if allowed:
            self.consumer.commit(offsets=[KTopicPartition(tp.topic, tp.partition, o)
                                          for tp, o in allowed.items()], asynchronous=False)

    def run(self) -> None:
        task: SinkTask = self.task
        cc = self.cconfig
        group = cc.get("consumer.override.group.id", f"connect-{self.connector}")
        handler = ErrorHandler(cc, sink=True)
        self.kconv = kconv = converter("key", cc, self.worker.props)
        self.vconv = vconv = converter("value", cc, self.worker.props)
        self.hconv = header_converter(cc, self.worker.props)
        transforms = TransformChain.from_props(cc)
        task.initialize(_SinkContext(self, self.config, _Reporter(self, handler)))
        task.start(self.config)
        # created last, closed in the finally below: a consumer left open would hold
        # its partitions from a restarted task until the session times out
        self.consumer = Consumer({**self.worker.client_config(
            "consumer", prefixed(cc, "consumer.override.")),
            "group.id": group, "enable.auto.commit": "false",
            "auto.offset.reset": "earliest", "enable.partition.eof": "false",
            "logger": KAFKA_LOG})
        seen_topics: set[str] = set()

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            new = [TopicPartition(p.topic, p.partition) for p in parts]
            self.assigned.update(new)
            if not self._running.is_set():  # the worker paused the task: these too
                consumer.pause(parts)
            task.open(new)

        def on_revoke(consumer: Any, parts: list[Any]) -> None:
            gone = {TopicPartition(p.topic, p.partition) for p in parts} & self.assigned
            if not gone:
                return
            if not failing:  # a failed put's records are not committed
                self._commit(gone)
            task.close(sorted(gone, key=lambda t: (t.topic, t.partition)))
            self.assigned -= gone
            for tp in gone:
                self.current.pop(tp, None)

        regex = cc.get("topics.regex", "").strip()
        topics = ([f"^{regex}"] if regex else
                  [t.strip() for t in cc.get("topics", "").split(",") if t.strip()])
        self.consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
        self.state = RUNNING
        next_commit = time.monotonic() + self.worker.flush_interval_ms / 1000
        paused_all = False
        failing = False
        try:
            while not self._stop.is_set():
                if not self._running.is_set():  # keep the group membership, fetch nothing
                    if not paused_all and self.assigned:
                        self.consumer.pause([KTopicPartition(t.topic, t.partition)
                                             for t in self.assigned])
                        paused_all = True
                    self.state = PAUSED
                elif paused_all:
                    self.consumer.resume([KTopicPartition(t.topic, t.partition)
                                          for t in self.assigned])
                    paused_all = False
                    self.state = RUNNING
                for tp, off in list(self.seeks.items()):
                    if tp in self.assigned:  # others wait for their assignment
                        try:
                            self.consumer.seek(KTopicPartition(tp.topic, tp.partition, off))
                        except KafkaException:
                            continue  # not fetching yet: try again next round
                        self.seeks.pop(tp)
                msgs = self.consumer.consume(500, timeout=0.2)
                batch: list[SinkRecord] = []
                self.raw.clear()
                consumed: dict[TopicPartition, int] = {}
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaException(err)
                    topic = msg.topic() or ""
                    tp = TopicPartition(topic, msg.partition() or 0)
                    if topic not in seen_topics:
                        seen_topics.add(topic)
                        self.on_topic(topic)
                    record = self._convert(msg, handler, kconv, vconv, transforms)
                    if record is not None:
                        batch.append(record)
                        self.raw[(topic, msg.partition(), msg.offset())] = (
                            msg.key(), msg.value())
                    consumed[tp] = (msg.offset() or 0) + 1
                if batch and not self._put(task, batch):
                    break  # stopped while retrying: nothing of the batch is committed
                self.current.update(consumed)  # only once put returned
                if self.commit_requested or time.monotonic() >= next_commit:
                    self.commit_requested = False
                    self._commit()
                    next_commit = time.monotonic() + self.worker.flush_interval_ms / 1000
            self._commit()
            task.close(sorted(self.assigned, key=lambda t: (t.topic, t.partition)))
            self.assigned.clear()
        except BaseException:
            failing = True
            raise
        finally:
            transforms.close()
            self.consumer.close()
            with contextlib.suppress(Exception):  # on the task's thread, after its last put
                task.stop()
            if self.dlq is not None:
                self.dlq.flush(STOP_TIMEOUT_S)

    def _put(self, task: SinkTask, batch: list[SinkRecord]) -> bool:
        """``put`` until it returns (True) or the task stops (False)."""
        while True:
            try:
                task.put(batch)
                return True
            except RetriableError as e:
                log.warning("Task %s-%d put raised a retriable error; retrying the same "
                            "%d records in %d ms: %s", self.connector, self.id, len(batch),
                            max(self.backoff_ms, MIN_BACKOFF_MS), e)
                if self._stop.wait(max(self.backoff_ms, MIN_BACKOFF_MS) / 1000):
                    return False

    def _headers(self, msg: Any) -> tuple[Header, ...]:
        out = []
        for k, v in msg.headers() or []:
            schema, value = self.hconv.to_connect_header(msg.topic(), k, v)
            out.append(Header(k, value, schema))
        return tuple(out)

    def _convert(self, msg: Any, handler: ErrorHandler, kconv: Any, vconv: Any,
                 transforms: TransformChain) -> SinkRecord | None:
        where = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()}
        try:
            ks, key = handler.run("KEY_CONVERTER", type(kconv).__name__,
                                  lambda: kconv.to_connect_data(msg.topic(), msg.key()), **where)
            vs, value = handler.run("VALUE_CONVERTER", type(vconv).__name__,
                                    lambda: vconv.to_connect_data(msg.topic(), msg.value()),
                                    **where)
            ts_type, ts = msg.timestamp()
            record = SinkRecord(
                msg.topic(), msg.partition(), ks, key, vs, value, ts if ts >= 0 else None,
                handler.run("HEADER_CONVERTER", type(self.hconv).__name__,
                            lambda: self._headers(msg), **where),
                kafka_offset=msg.offset(),
                timestamp_type="LogAppendTime" if ts_type == 2 else "CreateTime",
                original_topic=msg.topic(), original_kafka_partition=msg.partition(),
                original_kafka_offset=msg.offset())
            out = transforms.apply(record, lambda cls, fn: handler.run(
                "TRANSFORMATION", cls, fn, **where))
            assert out is None or isinstance(out, SinkRecord)
            return out
        except Skip as skip:
            self._to_dlq(handler, skip, msg.topic(), msg.partition(), msg.offset(),
                         msg.key(), msg.value())
            return None

    def _to_dlq(self, handler: ErrorHandler, skip: Skip, topic: str, partition: int,
                offset: int, key: bytes | None, value: bytes | None) -> None:
        if not handler.dlq_topic:
            return
        if self.dlq is None:
            config = self.worker.client_config("producer")
            admin = AdminClient({k: v for k, v in config.items()})
            futures = admin.create_topics([NewTopic(handler.dlq_topic, DLQ_PARTITIONS,
                                                    handler.dlq_replication)])
            for f in futures.values():
                try:
                    f.result(STOP_TIMEOUT_S)
                except KafkaException as e:
                    if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
            self.dlq = Producer({**config, "acks": "all", "logger": KAFKA_LOG})
        headers: list[tuple[str, str | bytes | None]] | None = (
            list(dlq_headers(skip.failure, self.connector, self.id))
            if handler.dlq_headers else None)
        self.dlq.produce(handler.dlq_topic, key=key, value=value, headers=headers)
        self.dlq.poll(0)



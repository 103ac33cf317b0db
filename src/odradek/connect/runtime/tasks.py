"""Task threads: each task of a connector runs its loop in a thread of its own.

A **source** task: ``poll`` → transforms → key/value/header converters →
produce (an idempotent producer, ``acks=all``). Records are remembered in the
order they were polled; an offset becomes committable once its record and
every record polled before it were acknowledged (or dropped by a transform or
skipped by ``errors.tolerance=all``), so the offsets file never runs ahead of
what the topic holds. Committable offsets are written every
``offset.flush.interval.ms`` and when the task stops (after the producer is
flushed).

A **sink** task: a consumer in group ``connect-<connector>``
(``enable.auto.commit=false``, ``auto.offset.reset=earliest``) → converters →
transforms → ``put``; every ``offset.flush.interval.ms`` (and on revocation
and stop) ``pre_commit`` then a synchronous commit of the offsets it returns.
A record that fails a stage with ``errors.tolerance=all`` is skipped and, with
``errors.deadletterqueue.topic.name`` set, its original bytes are produced to
that topic (created if missing), with the ``__connect.errors.*`` headers when
``errors.deadletterqueue.context.headers.enable`` is true.

States (Kafka's): UNASSIGNED → RUNNING ⇄ PAUSED; an exception from the task
makes it FAILED with its trace; a stopped runner is gone (its status with it).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from odradek.connect.api import OffsetStorageReader as _Reader
from odradek.connect.api import (
    RecordMetadata,
    SinkTask,
    SinkTaskContext,
    SourceTask,
    SourceTaskContext,
    TopicPartition,
)
from odradek.connect.data import Header, SinkRecord, SourceRecord
from odradek.connect.errors import ErrorHandler, Skip, dlq_headers
from odradek.connect.runtime.config import WorkerConfig, prefixed
from odradek.connect.runtime.offsets import OffsetFile, Reader
from odradek.connect.runtime.pipeline import chain, converter, header_bytes

UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED = (
    "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED")
STOP_TIMEOUT_S = 10.0
KAFKA_LOG = logging.getLogger("odradek.connect.kafka")
"""Where librdkafka's own log lines go (not stderr)."""


class TaskRunner:
    """One task's thread and status. ``on_topic`` is told each topic used."""

    def __init__(self, connector: str, task_id: int, task_cls: type, config: Mapping[str, str],
                 connector_config: Mapping[str, str], worker: WorkerConfig,
                 on_topic: Callable[[str], None], paused: bool = False) -> None:
        self.connector = connector
        self.id = task_id
        self.task_cls = task_cls
        self.config = dict(config)
        self.cconfig = dict(connector_config)
        self.worker = worker
        self.on_topic = on_topic
        self.state = UNASSIGNED
        self.trace: str | None = None
        self._stop = threading.Event()
        self._running = threading.Event()
        if not paused:
            self._running.set()
        self.task: Any = None
        self.thread = threading.Thread(target=self._main, daemon=True,
                                       name=f"connect-{connector}-{task_id}")

    def start(self) -> None:
        self.thread.start()

    def pause(self) -> None:
        self._running.clear()
        if self.state == RUNNING:
            self.state = PAUSED

    def resume(self) -> None:
        self._running.set()
        if self.state == PAUSED:
            self.state = RUNNING

    def stop(self, join: bool = True) -> None:
        self._stop.set()
        self._running.set()
        self.interrupt()
        if join and self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(STOP_TIMEOUT_S)

    def interrupt(self) -> None:
        """Make the task's loop return soon (called from another thread)."""

    def _main(self) -> None:
        try:
            self.task = self.task_cls()
            self.run()
        except Exception:
            self.trace = traceback.format_exc()
            self.state = FAILED

    def _wait_running(self) -> bool:
        """Block while paused; False once stopping."""
        if not self._running.is_set():
            self.state = PAUSED
            self._running.wait()
        if self.state == PAUSED and not self._stop.is_set():
            self.state = RUNNING
        return not self._stop.is_set()

    def run(self) -> None:
        raise NotImplementedError


class _SourceContext(SourceTaskContext):
    def __init__(self, configs: Mapping[str, str], reader: _Reader) -> None:
        self.configs = configs
        self._reader = reader

    @property
    def offset_storage_reader(self) -> _Reader:
        return self._reader


class SourceRunner(TaskRunner):
    offsets: OffsetFile

    def interrupt(self) -> None:
        task = self.task
        if task is not None:  # SourceTask.stop is called from another thread, as Kafka's
            with contextlib.suppress(Exception):  # best effort
                task.stop()

    def run(self) -> None:
        task: SourceTask = self.task
        task.initialize(_SourceContext(self.config, Reader(self.offsets, self.connector)))
        handler = ErrorHandler(self.cconfig, sink=False)
        kconv = converter("key", self.cconfig, self.worker.props)
        vconv = converter("value", self.cconfig, self.worker.props)
        transforms = chain(self.cconfig)
        producer = Producer({**self.worker.client_config(
            "producer", prefixed(self.cconfig, "producer.override.")),
            "enable.idempotence": "true", "acks": "all", "linger.ms": "5", "logger": KAFKA_LOG})
        # [record, acked] in poll order; acked when produced, dropped or skipped
        outstanding: collections.deque[list[Any]] = collections.deque()
        committable: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        failure: list[BaseException] = []
        seen_topics: set[str] = set()

        def delivered(entry: list[Any]) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    failure.append(KafkaException(err))
                    return
                entry[1] = True
                task.commit_record(entry[0], RecordMetadata(msg.topic(), msg.partition(),
                                                            msg.offset()))
            return cb

        last: list[Any] = [None, ""]  # the previous record's partition map and its key

        def flush_offsets() -> None:
            while outstanding and outstanding[0][1]:
                record: SourceRecord = outstanding.popleft()[0]
                partition = record.source_partition
                if partition:
                    if partition is not last[0]:  # most records share their task's map
                        last[0], last[1] = partition, repr(sorted(partition.items()))
                    committable[last[1]] = (partition, record.source_offset)
            if committable:
                self.offsets.put(self.connector, list(committable.values()))
                committable.clear()
                task.commit()

        task.start(self.config)
        self.state = RUNNING
        next_flush = time.monotonic() + self.worker.flush_interval_ms / 1000
        try:
            while self._wait_running():
                records = task.poll() or []
                for record in records:
                    entry: list[Any] = [record, False]
                    outstanding.append(entry)
                    try:
                        out = handler.run("TRANSFORMATION", "chain", partial(
                            _apply, transforms, record)) if transforms.steps else record
                        if out is None:
                            entry[1] = True
                            task.commit_record(record, None)
                            continue
                        topic = out.topic
                        key = handler.run("KEY_CONVERTER", type(kconv).__name__, partial(
                            kconv.from_connect_data, out.topic, out.key_schema, out.key))
                        value = handler.run("VALUE_CONVERTER", type(vconv).__name__, partial(
                            vconv.from_connect_data, out.topic, out.value_schema, out.value))
                        headers = [(h.key, header_bytes(h.value)) for h in out.headers]
                    except Skip:
                        entry[1] = True
                        continue
                    if topic not in seen_topics:
                        seen_topics.add(topic)
                        self.on_topic(topic)
                    kwargs: dict[str, Any] = {"key": key, "value": value,
                                              "on_delivery": delivered(entry)}
                    if out.kafka_partition is not None:
                        kwargs["partition"] = out.kafka_partition
                    if out.timestamp is not None:
                        kwargs["timestamp"] = out.timestamp
                    if headers:
                        kwargs["headers"] = headers
                    while True:
                        try:
                            producer.produce(topic, **kwargs)
                            break
                        except BufferError:
                            producer.poll(0.05)
                producer.poll(0)
                if failure:
                    raise failure[0]
                if time.monotonic() >= next_flush:
                    flush_offsets()
                    next_flush = time.monotonic() + self.worker.flush_interval_ms / 1000
        finally:
            producer.flush(STOP_TIMEOUT_S)
            if not failure:
                flush_offsets()
            transforms.close()
        if failure:
            raise failure[0]


def _apply(transforms: Any, record: Any) -> Any:
    for step in transforms.steps:
        record = step.apply(record)
        if record is None:
            return None
    return record


class _SinkContext(SinkTaskContext):
    def __init__(self, runner: SinkRunner, configs: Mapping[str, str]) -> None:
        self.configs = configs
        self.runner = runner

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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assigned: set[TopicPartition] = set()
        self.seeks: dict[TopicPartition, int] = {}
        self.current: dict[TopicPartition, int] = {}
        self.commit_requested = False
        self.dlq: Producer | None = None

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
        self.consumer = Consumer({**self.worker.client_config(
            "consumer", prefixed(cc, "consumer.override.")),
            "group.id": group, "enable.auto.commit": "false",
            "auto.offset.reset": "earliest", "enable.partition.eof": "false",
            "logger": KAFKA_LOG})
        handler = ErrorHandler(cc, sink=True)
        kconv = converter("key", cc, self.worker.props)
        vconv = converter("value", cc, self.worker.props)
        transforms = chain(cc)
        task.initialize(_SinkContext(self, self.config))
        task.start(self.config)
        seen_topics: set[str] = set()

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            new = [TopicPartition(p.topic, p.partition) for p in parts]
            self.assigned.update(new)
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
                    self.consumer.seek(KTopicPartition(tp.topic, tp.partition, off))
                    self.seeks.pop(tp)
                msgs = self.consumer.consume(500, timeout=0.2)
                batch: list[SinkRecord] = []
                raw: list[tuple[bytes | None, bytes | None]] = []
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
                        raw.append((msg.key(), msg.value()))
                    consumed[tp] = (msg.offset() or 0) + 1
                if batch:
                    try:
                        handler.run("TASK_PUT", type(task).__name__, partial(task.put, batch))
                    except Skip as skip:
                        for r, (key, value) in zip(batch, raw, strict=True):
                            self._to_dlq(handler, skip, r.original_topic,
                                         r.original_kafka_partition, r.original_kafka_offset,
                                         key, value)
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

    def _convert(self, msg: Any, handler: ErrorHandler, kconv: Any, vconv: Any,
                 transforms: Any) -> SinkRecord | None:
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
                tuple(Header(k, v) for k, v in (msg.headers() or [])),
                kafka_offset=msg.offset(),
                timestamp_type="LogAppendTime" if ts_type == 2 else "CreateTime",
                original_topic=msg.topic(), original_kafka_partition=msg.partition(),
                original_kafka_offset=msg.offset())
            out: SinkRecord | None = handler.run(
                "TRANSFORMATION", "chain", lambda: _apply(transforms, record), **where)
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
            futures = admin.create_topics([NewTopic(handler.dlq_topic, 1,
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


